package pglease_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/pglease"
)

// TestIntegrationWatchShared: the watchers of one Store share one
// listening connection, each told only of its own lease; one that stops
// leaves the others listening, and once the last returns the connection
// is given up.
func TestIntegrationWatchShared(t *testing.T) {
	s, db := newStore(t)
	type watch struct {
		events chan lease.Event
		cancel context.CancelFunc
		done   chan error
	}
	stop := func(w *watch) error {
		w.cancel()
		err := <-w.done
		w.done <- err // for the next stop
		return err
	}
	start := func(name string) *watch {
		ctx, cancel := context.WithCancel(t.Context())
		w := &watch{events: make(chan lease.Event, 16), cancel: cancel, done: make(chan error, 1)}
		go func() { w.done <- s.Watch(ctx, name, func(ev lease.Event) { w.events <- ev }) }()
		t.Cleanup(func() { stop(w) })
		return w
	}
	next := func(w *watch, what string) lease.Event {
		t.Helper()
		for {
			select {
			case ev := <-w.events:
				if ev.Version != lease.NoVersion || what == "listening" {
					return ev
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no event for %s", what)
				return lease.Event{}
			}
		}
	}
	a, b := start("a"), start("b")
	next(a, "listening")
	next(b, "listening")
	rec := lease.Record{Holder: "x", Token: 1, Duration: time.Second, Nonce: "n"}
	va, err := s.Put(t.Context(), "a", rec, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(a, "a's write"); ev.Version != va {
		t.Fatalf("a's watcher: %+v, want version %q", ev, va)
	}
	stop(a)
	vb, err := s.Put(t.Context(), "b", rec, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(b, "b's write"); ev.Version != vb {
		t.Fatalf("b's watcher: %+v, want version %q (nothing of a's)", ev, vb)
	}
	stop(b)
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections still in use once every Watch returned", n)
	}
}

// watchEvents runs s.Watch(name) until the test ends, its events on the
// returned channel.
func watchEvents(t *testing.T, s *pglease.Store, name string) <-chan lease.Event {
	ctx, cancel := context.WithCancel(context.Background())
	evs := make(chan lease.Event, 64)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Watch(ctx, name, func(ev lease.Event) { evs <- ev }) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return evs
}

// await returns the next event, failing the test after 60s.
func await(t *testing.T, evs <-chan lease.Event, what string) lease.Event {
	t.Helper()
	select {
	case ev := <-evs:
		return ev
	case <-time.After(time.Minute):
		t.Fatalf("no event within a minute: want %s", what)
		return lease.Event{}
	}
}

// A Watch that joins a Store's listener once it listens is told so at
// once, by the first event, as the first Watch was: a waiter reads the
// lease on it, for whatever changed before it listened.
func TestIntegrationWatchJoinsListener(t *testing.T) {
	s, _ := newStore(t)
	a := watchEvents(t, s, "a")
	if ev := await(t, a, "a listening"); ev.Version != lease.NoVersion {
		t.Fatalf("a's first event %+v, want the one that says it listens", ev)
	}
	b := watchEvents(t, s, "b") // the listener listens already
	if ev := await(t, b, "b listening"); ev.Version != lease.NoVersion {
		t.Fatalf("b's first event %+v, want the one that says it listens", ev)
	}
	v, err := s.Put(t.Context(), "b", lease.Record{Holder: "x", Token: 1, Duration: time.Second, Nonce: "n"}, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if ev := await(t, b, "b's write"); ev.Version != v {
		t.Fatalf("b's event %+v, want version %q", ev, v)
	}
}

// A listening connection that goes silent (a NAT or firewall forgot it:
// no FIN, no RST) is found by its ping and opened again, within twice the
// feed's idle time: the watcher is told it listens again, and hears the
// writes that follow.
func TestIntegrationWatchSilentConnection(t *testing.T) {
	dsn := testservers.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testservers.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	direct := open(t, dsn)
	table := newTable(t, direct)
	s, err := pglease.New(open(t, u.String()), pglease.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := pglease.New(direct, pglease.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	evs := watchEvents(t, s, "job")
	await(t, evs, "listening")
	proxy.Silence()
	silent := time.Now()
	if ev := await(t, evs, "listening again"); ev.Version != lease.NoVersion {
		t.Fatalf("event %+v after the connection went silent, want the one that says it listens again", ev)
	}
	t.Logf("listening again %v after the connection went silent", time.Since(silent).Round(time.Millisecond))
	v, err := writer.Put(t.Context(), "job", lease.Record{Holder: "x", Token: 1, Duration: time.Second, Nonce: "n"}, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if ev := await(t, evs, "the write after"); ev.Version != v {
		t.Fatalf("event %+v, want version %q", ev, v)
	}
}
