package natslease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/natslease"
)

// permissions is docs/nats.md's, for the bucket "leases".
const permissions = `authorization {
  users = [
    {user: admin, password: admin}
    {user: tenure, password: pw, permissions: {
      publish: ["$KV.leases.>", "$JS.API.STREAM.INFO.KV_leases", "$JS.API.DIRECT.GET.KV_leases.>",
                "$JS.API.STREAM.MSG.GET.KV_leases", "$JS.API.CONSUMER.CREATE.KV_leases.>",
                "$JS.API.CONSUMER.DELETE.KV_leases.>", "$JS.API.INFO"]
      subscribe: ["_INBOX.>"]
    }}
    {user: nobody, password: pw, permissions: {publish: ["nothing"], subscribe: ["_INBOX.>"]}}
  ]
}`

// TestIntegrationPermissions: a user with docs/nats.md's permissions runs
// every call; one without them gets a permanent error saying what to
// allow.
func TestIntegrationPermissions(t *testing.T) {
	srv := testservers.StartNATS(t, permissions)
	ctx := t.Context()
	as := func(user, pass string) jetstream.JetStream {
		nc := connect(t, "nats://"+srv.Addr, nats.UserInfo(user, pass))
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	if _, err := natslease.CreateBucket(ctx, as("admin", "admin"), "leases", 1); err != nil {
		t.Fatal(err)
	}
	kv, err := as("tenure", "pw").KeyValue(ctx, "leases")
	if err != nil {
		t.Fatalf("bind the bucket as tenure: %v", err)
	}
	s, _ := natslease.New(kv)
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	v, err := s.Put(ctx, "x", rec, lease.NoVersion)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, _, err := s.Get(ctx, "x"); err != nil {
		t.Fatalf("get: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	heard := make(chan lease.Event, 4)
	done := make(chan error, 1)
	go func() { done <- s.Watch(wctx, "x", func(e lease.Event) { heard <- e }) }()
	<-heard // listening
	if _, err := s.Put(ctx, "x", rec, v); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if e := <-heard; e.Record == nil || e.Record.Holder != "a" {
		t.Errorf("the feed told %+v", e)
	}
	cancel()
	<-done
	if err := s.List(ctx, "", func(string) error { return nil }); err != nil {
		t.Fatalf("list: %v", err)
	}
	if err := s.Delete(ctx, "x", lease.AnyVersion); err != nil {
		t.Fatalf("delete: %v", err)
	}

	denied, _ := natslease.Open(as("nobody", "pw"), "leases", false, 1)
	_, _, gerr := denied.Get(ctx, "x")
	if !errors.Is(gerr, lease.ErrPermanent) || !strings.Contains(gerr.Error(), "docs/nats.md") {
		t.Errorf("without permissions: %v, want a permanent error saying what to allow", gerr)
	}
}
