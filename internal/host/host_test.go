package host

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// entry records what the host did with it.
type entry struct {
	Slot
	name string
	due  time.Time
	log  *[]string
	res  []election.Result
}

func (e *entry) Due() time.Time { return e.due }
func (e *entry) Fire(now time.Time) {
	*e.log = append(*e.log, e.name+" fired")
	e.due = time.Time{}
}
func (e *entry) CallDone(f *Flight, res election.Result) {
	*e.log = append(*e.log, e.name+" answered "+f.name)
	e.res = append(e.res, res)
}

// run starts h's loop and returns a function that ends it and waits for
// every goroutine.
func run(h *Host) (stop func()) {
	done := make(chan struct{})
	go func() { h.Run(nil, nil); close(done) }()
	return func() {
		h.Do(h.Exit)
		<-done
		h.Wait()
	}
}

// One timer serves every entry, and they fire in the order of their Due.
func TestTimersFireInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		h := New(Config{Clock: realClock{}, Store: memlease.New()})
		now := time.Now()
		a := &entry{name: "a", due: now.Add(2 * time.Second), log: &log}
		b := &entry{name: "b", due: now.Add(time.Second), log: &log}
		c := &entry{name: "c", due: now.Add(3 * time.Second), log: &log}
		d := &entry{name: "d", due: now.Add(2 * time.Second), log: &log} // due with a: after it, which came first
		for _, e := range []*entry{a, b, c, d} {
			h.Fix(e)
		}
		stop := run(h)
		time.Sleep(2500 * time.Millisecond) // fake time: the bubble's clock
		h.Do(func() { c.due = time.Time{}; h.Fix(c) })
		time.Sleep(time.Second)
		stop()
		if want := []string{"b fired", "a fired", "d fired"}; !slices.Equal(log, want) {
			t.Fatalf("fired %q, want %q (c was taken out before its time)", log, want)
		}
	})
}

// blockingStore answers a call only once the test lets it, or its context
// ends.
type blockingStore struct {
	lease.Store
	started chan string
	release chan struct{}
}

func (s blockingStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	s.started <- name
	select {
	case <-s.release:
		return s.Store.Get(ctx, name)
	case <-ctx.Done():
		return lease.Record{}, "", ctx.Err()
	}
}

// blocked returns a running host of at most maxCalls calls (0: no bound)
// on a blockingStore, the store, an entry, and run's stop.
func blocked(maxCalls int) (*Host, blockingStore, *entry, func()) {
	st := blockingStore{Store: memlease.New(), started: make(chan string, 4), release: make(chan struct{})}
	h := New(Config{Clock: realClock{}, Store: st, MaxCalls: maxCalls})
	e := &entry{name: "e", log: new([]string)}
	return h, st, e, run(h)
}

// Beyond MaxCalls calls wait in order; one cancelled while it waits is
// dropped unanswered; one cancelled once started is answered with its
// context's error.
func TestCallsBoundedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st, e, stop := blocked(1)
		var first, second *Flight
		h.Do(func() {
			first = h.Call(e, 0, "one", election.Op{ID: 1, Kind: election.OpGet}, 0)
			second = h.Call(e, 0, "two", election.Op{ID: 2, Kind: election.OpGet}, 0)
			h.Call(e, 0, "three", election.Op{ID: 3, Kind: election.OpGet}, 0)
			h.Cancel(second)
		})
		synctest.Wait()
		if got := len(st.started); got != 1 {
			t.Fatalf("%d calls started with MaxCalls 1", got)
		}
		h.Do(func() { h.Cancel(first) })
		synctest.Wait()
		close(st.release)
		synctest.Wait()
		stop()
		var started []string
		for len(st.started) > 0 {
			started = append(started, <-st.started)
		}
		if want := []string{"one", "three"}; !slices.Equal(started, want) {
			t.Errorf("started %q, want %q", started, want)
		}
		if want := []string{"e answered one", "e answered three"}; !slices.Equal(*e.log, want) {
			t.Errorf("answers %q, want %q", *e.log, want)
		}
		if len(e.res) > 0 && !errors.Is(e.res[0].Err, context.Canceled) {
			t.Errorf("the cancelled call answered %v, want context.Canceled", e.res[0].Err)
		}
	})
}

// A call with a timeout ends at it; a write is stamped and its answer
// carries the record written.
func TestCallTimeoutAndWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, e, stop := blocked(0)
		start := time.Now()
		h.Do(func() {
			h.Call(e, 7, "slow", election.Op{ID: 1, Kind: election.OpGet}, time.Second)
			h.Call(e, 0, "w", election.Op{ID: 2, Kind: election.OpPut, Record: lease.Record{Holder: "me", Token: 1, Duration: time.Second, Nonce: "n"}, Expect: lease.NoVersion}, 0)
		})
		time.Sleep(2 * time.Second)
		stop()
		if len(e.res) != 2 {
			t.Fatalf("%d answers, want 2: %q", len(e.res), *e.log)
		}
		w, slow := e.res[0], e.res[1]
		if !errors.Is(slow.Err, context.DeadlineExceeded) {
			t.Errorf("the call with a timeout answered %v", slow.Err)
		}
		if w.Err != nil || w.Record.Holder != "me" || !w.Record.WrittenAt.Equal(start.UTC()) {
			t.Errorf("the write answered %+v, want the record written at %v", w, start.UTC())
		}
	})
}

// Once Run has returned, Do refuses and calls in flight are cancelled.
func TestRunEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st, e, stop := blocked(0)
		h.Do(func() { h.Call(e, 0, "x", election.Op{ID: 1, Kind: election.OpGet}, 0) })
		<-st.started
		stop() // returns only once the call's goroutine has: cancelled
		if h.Do(func() {}) {
			t.Error("Do ran after Run returned")
		}
		if len(*e.log) != 0 {
			t.Errorf("an answer reached the entry after Run returned: %q", *e.log)
		}
	})
}
