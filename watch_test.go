package tenure_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// Watch reports the holder and its changes, never writing: a leader, its
// release, the next leader, and that leader going silent (Expired, after
// its lease stretched by ρ on the watcher's clock).
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memlease.New()
		counted := &countingStore{Store: mem}
		var mu sync.Mutex
		var seen []tenure.Observation
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			done <- tenure.Watch(ctx, tenure.WatchConfig{Lease: leaseName, Store: counted}, func(o tenure.Observation) {
				mu.Lock()
				seen = append(seen, o)
				mu.Unlock()
			})
		}()
		synctest.Wait() // the watcher's first read: nothing there yet
		a := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "a"}})
		stopA := run(t, a, context.Background())
		wait(5 * time.Second)
		stopA()
		wait(3 * time.Second) // the watcher sees the released record
		bStore := leasetest.NewFaults(mem)
		run(t, newCandidate(t, tenure.Config{Store: bStore, Runtime: tenure.Runtime{ID: "b"}}), context.Background())
		wait(5 * time.Second)
		bStore.FailAll() // b goes silent
		wait(15 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		bStore.Heal()
		mu.Lock()
		defer mu.Unlock()
		var story []string
		for _, o := range seen {
			switch {
			case !o.Found:
				story = append(story, "absent")
			case o.Released:
				story = append(story, "released")
			case o.Expired:
				story = append(story, o.Holder+" silent")
			default:
				story = append(story, o.Holder)
			}
		}
		want := []string{"absent", "a", "released", "b", "b silent"}
		if len(story) != len(want) {
			t.Fatalf("observed %q, want %q", story, want)
		}
		for i := range want {
			if story[i] != want[i] {
				t.Fatalf("observed %q, want %q", story, want)
			}
		}
		if seen[3].Token != seen[1].Token+1 {
			t.Fatalf("tokens %d then %d", seen[1].Token, seen[3].Token)
		}
		// Reported silent at the first read at least 10.01s after its last
		// renewal was first seen: polls come every 2s.
		if age := seen[4].At.Sub(seen[4].Since); age < 10010*time.Millisecond || age >= 12010*time.Millisecond {
			t.Fatalf("reported silent at the age of %v", age)
		}
		if n := counted.puts.Load(); n != 0 {
			t.Fatalf("the watcher wrote %d times", n)
		}
	})
}

// Watch fails at once on a permanent error, and refuses a bad config.
func TestWatchErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewFaults(memlease.New())
		store.SetHook(func(string, string) error { return lease.Permanent(errors.New("NoSuchBucket")) })
		err := tenure.Watch(context.Background(), tenure.WatchConfig{Lease: leaseName, Store: store}, func(tenure.Observation) {})
		if !errors.Is(err, lease.ErrPermanent) {
			t.Fatalf("Watch = %v", err)
		}
		if err := tenure.Watch(context.Background(), tenure.WatchConfig{Lease: "../x", Store: store}, nil); !errors.Is(err, lease.ErrInvalidName) {
			t.Fatalf("bad name: %v", err)
		}
	})
}
