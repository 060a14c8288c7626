package redislease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/redislease"
)

// Tests in this file talk to the Redis server that scripts/testservers.sh
// starts (TENURE_REDIS_URL), or to servers of their own
// (testservers.StartRedis).

func client(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

func newStore(t testing.TB) (*redislease.Store, *redis.Client) {
	c := client(t, testservers.Redis(t))
	s, err := redislease.New(c, redislease.Config{Prefix: testservers.UniqueName("tenure") + ":"})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestIntegrationConformance(t *testing.T) {
	s, _ := newStore(t)
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers, each with a client (a connection) of
// its own, race on one key for 50 rounds; exactly one wins each.
func TestIntegrationRace(t *testing.T) {
	url, prefix := testservers.Redis(t), testservers.UniqueName("race")+":"
	var stores []lease.Store
	for range 64 {
		s, err := redislease.New(client(t, url), redislease.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	leasetest.RaceEach(t, stores, 50)
}

// TestIntegrationConflictCarriesRecord: a write that lost brings the
// stored record back from the script, at no second request.
func TestIntegrationConflictCarriesRecord(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	rec := lease.Record{Holder: "a", Token: 3, Duration: time.Second, Nonce: "n"}
	v, err := s.Put(ctx, "x", rec, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, expect := range []lease.Version{lease.NoVersion, "0123456789abcdef0123456789abcdef"} {
		_, err = s.Put(ctx, "x", lease.Record{Holder: "b", Token: 4, Duration: time.Second, Nonce: "m"}, expect)
		var ce *lease.ConflictError
		if !errors.As(err, &ce) || !ce.Found || ce.Version != v || !ce.Current.Equal(rec) {
			t.Errorf("expect %q: conflict %#v, want one carrying %q at %q", expect, err, rec.Holder, v)
		}
	}
}

// TestIntegrationNotALease: a key of the prefix that is not a lease's hash
// (a string, a hash without the fields) is a record error, for Get and
// Put alike, and Put leaves it alone.
func TestIntegrationNotALease(t *testing.T) {
	s, c := newStore(t)
	ctx := t.Context()
	if err := c.Set(ctx, s.Key("str"), "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, s.Key("hash"), "x", "1").Err(); err != nil {
		t.Fatal(err)
	}
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	for _, name := range []string{"str", "hash"} {
		_, _, gerr := s.Get(ctx, name)
		_, perr := s.Put(ctx, name, rec, lease.NoVersion)
		if !errors.Is(gerr, lease.ErrInvalidRecord) {
			t.Errorf("%s: Get: %v, want a record error", name, gerr)
		}
		if !errors.Is(perr, lease.ErrInvalidRecord) && !errors.Is(perr, lease.ErrConflict) {
			t.Errorf("%s: Put: %v, want a record error or a conflict", name, perr)
		}
	}
	if v, _ := c.Get(ctx, s.Key("str")).Result(); v != "hello" {
		t.Errorf("the string became %q", v)
	}
}

// TestIntegrationLeastPrivilege: a user allowed only what docs/redis.md's
// ACL allows runs every call; one without rights gets a permanent error
// saying what to allow, and a wrong password one saying to check it.
func TestIntegrationLeastPrivilege(t *testing.T) {
	url := testservers.Redis(t)
	admin := client(t, url)
	ctx := t.Context()
	prefix := testservers.UniqueName("acl") + ":"
	user, pass := testservers.UniqueName("tenure"), "s3cret"
	rule := strings.Fields(redislease.ACLRules(prefix))
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", user, "reset", "on", ">" + pass}, toAny(rule)...)...).Err(); err != nil {
		t.Fatal(err)
	}
	none := testservers.UniqueName("nobody")
	if err := admin.Do(ctx, "ACL", "SETUSER", none, "reset", "on", ">"+pass, "~other:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user, none) })
	login := func(u, p string) *redislease.Store {
		opt, _ := redis.ParseURL(url)
		opt.Username, opt.Password = u, p
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		s, _ := redislease.New(c, redislease.Config{Prefix: prefix})
		return s
	}
	s := login(user, pass)
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	v, err := s.Put(ctx, "x", rec, lease.NoVersion)
	if err != nil {
		t.Fatalf("put as %s: %v", user, err)
	}
	if _, _, err := s.Get(ctx, "x"); err != nil {
		t.Fatalf("get: %v", err)
	}
	if err := s.List(ctx, "", func(string) error { return nil }); err != nil {
		t.Fatalf("list: %v", err)
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
	if err := s.Delete(ctx, "x", lease.AnyVersion); err != nil {
		t.Fatalf("delete: %v", err)
	}

	denied := login(none, pass)
	_, _, gerr := denied.Get(ctx, "x")
	_, perr := denied.Put(ctx, "x", rec, lease.NoVersion)
	for _, err := range []error{gerr, perr} {
		if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "ACL") {
			t.Errorf("without rights: %v, want a permanent error saying what to allow", err)
		}
	}
	_, _, err = login(user, "wrong").Get(ctx, "x")
	if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "password") {
		t.Errorf("wrong password: %v, want a permanent error saying to check it", err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestIntegrationWatchAfterRestart: the server restarts (its data gone,
// as a server without persistence loses it); the watch listens again by
// itself and says so (NoVersion), and tells of the writes after.
func TestIntegrationWatchAfterRestart(t *testing.T) {
	srv := testservers.StartRedis(t)
	c := client(t, "redis://"+srv.Addr)
	s, _ := redislease.New(c, redislease.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	heard := make(chan lease.Event, 16)
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, "x", func(e lease.Event) { heard <- e }) }()
	defer func() { cancel(); <-done }()
	if e := <-heard; e.Version != lease.NoVersion {
		t.Fatalf("first event %+v, want NoVersion", e)
	}
	srv.Kill()
	srv.Start()
	if e := <-heard; e.Version != lease.NoVersion {
		t.Fatalf("after the restart: %+v, want NoVersion (listening again)", e)
	}
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	var v lease.Version
	for { // the client's pool may hold a connection the restart broke
		var err error
		if v, err = s.Put(t.Context(), "x", rec, lease.NoVersion); err == nil {
			break
		} else if errors.Is(err, lease.ErrConflict) {
			t.Fatal(err)
		}
	}
	if e := <-heard; e.Version != v || e.Record == nil || !e.Record.Equal(rec) {
		t.Errorf("after the write: %+v, want version %q with the record", e, v)
	}
}
