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
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/natslease"
)

// Tests in this file talk to the NATS server that scripts/testservers.sh
// starts (TENURE_NATS_URL).

func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// bucket returns a new bucket of its own on the server at url, and a
// store on it.
func bucket(t testing.TB, url string) (*natslease.Store, jetstream.KeyValue, string) {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ReplaceAll(testservers.UniqueName("tenure"), ".", "_")
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	kv, err := natslease.CreateBucket(ctx, js, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, name)
	})
	s, err := natslease.New(kv)
	if err != nil {
		t.Fatal(err)
	}
	return s, kv, name
}

func TestIntegrationConformance(t *testing.T) {
	s, _, _ := bucket(t, testservers.NATS(t))
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 32 writers, each with a connection of its own,
// race on one key for 30 rounds; exactly one wins each.
func TestIntegrationRace(t *testing.T) {
	url := testservers.NATS(t)
	_, _, name := bucket(t, url)
	var stores []lease.Store
	for range 32 {
		js, err := jetstream.New(connect(t, url))
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := natslease.New(kv)
		stores = append(stores, s)
	}
	leasetest.RaceEach(t, stores, 30)
}

// TestKeys: every lease name maps to a key NATS accepts, and back; names
// that differ map to keys that differ.
func TestKeys(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"a", "a.", "a..b", "a.b", "a:b", "jobs/nightly.", "x/y:z..", "a.:b", "A", "a/.b"} {
		if lease.ValidateName(name) != nil {
			continue
		}
		key := natslease.Key(name)
		if other, dup := seen[key]; dup {
			t.Errorf("%q and %q both map to %q", name, other, key)
		}
		seen[key] = name
		if strings.HasSuffix(key, ".") || strings.Contains(key, "..") || strings.ContainsAny(key, ":") {
			t.Errorf("%q maps to %q, which NATS refuses", name, key)
		}
	}
}

// TestIntegrationMissingBucket: a store on a bucket deleted under it fails
// its calls permanently, saying how to create one.
func TestIntegrationMissingBucket(t *testing.T) {
	url := testservers.NATS(t)
	s, _, name := bucket(t, url)
	js, _ := jetstream.New(connect(t, url))
	if err := js.DeleteKeyValue(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(t.Context(), "x", lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}, lease.NoVersion)
	if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "create") {
		t.Errorf("put into a deleted bucket: %v, want a permanent error saying how to create it", err)
	}
}
