package pglease_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
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
