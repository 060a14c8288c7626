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

// entry records what the host did with it, in log and, for a test to
// wait on, in seen.
type entry struct {
	Slot
	name string
	due  time.Time
	log  *[]string
	seen chan string
	res  []election.Result
}

func (e *entry) note(s string) {
	*e.log = append(*e.log, s)
	if e.seen != nil {
		e.seen <- s
	}
}

func (e *entry) Due() time.Time { return e.due }
func (e *entry) Fire(now time.Time) {
	e.due = time.Time{}
	e.note(e.name + " fired")
}
func (e *entry) CallDone(f *Flight, res election.Result) {
	e.res = append(e.res, res)
	e.note(e.name + " answered " + f.name)
}

// await waits until seen has carried want.
func await(seen <-chan string, want string) {
	for s := range seen {
		if s == want {
			return
		}
	}
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
		seen := make(chan string, 8)
		h := New(Config{Clock: realClock{}, Store: memlease.New()})
		now := time.Now()
		mk := func(name string, after time.Duration) *entry {
			return &entry{name: name, due: now.Add(after), log: &log, seen: seen}
		}
		a, b, c := mk("a", 2*time.Second), mk("b", time.Second), mk("c", 3*time.Second)
		d := mk("d", 2*time.Second) // due with a: after it, which came first
		for _, e := range []*entry{a, b, c, d} {
			h.Fix(e)
		}
		stop := run(h)
		await(seen, "d fired")
		e := mk("e", 4*time.Second) // after c's time: c fires first unless taken out
		h.Do(func() { c.due = time.Time{}; h.Fix(c); h.Fix(e) })
		await(seen, "e fired")
		stop()
		if want := []string{"b fired", "a fired", "d fired", "e fired"}; !slices.Equal(log, want) {
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
	e := &entry{name: "e", log: new([]string), seen: make(chan string, 8)}
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

// A call with a timeout ends at it, by the host's clock; a write is stamped and its answer
// carries the record written.
func TestCallTimeoutAndWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _, e, stop := blocked(0)
		start := time.Now()
		h.Do(func() {
			h.Call(e, 7, "slow", election.Op{ID: 1, Kind: election.OpGet}, time.Second)
			h.Call(e, 0, "w", election.Op{ID: 2, Kind: election.OpPut, Record: lease.Record{Holder: "me", Token: 1, Duration: time.Second, Nonce: "n"}, Expect: lease.NoVersion}, 0)
		})
		await(e.seen, "e answered slow") // after the write's: it waits for its timeout
		stop()
		if len(e.res) != 2 {
			t.Fatalf("%d answers, want 2: %q", len(e.res), *e.log)
		}
		w, slow := e.res[0], e.res[1]
		// The Core's timeout on the clock, or the context's deadline that
		// the store sees, whichever the loop hears first.
		if !errors.Is(slow.Err, election.ErrTimeout) && !errors.Is(slow.Err, context.DeadlineExceeded) {
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

// An entry due again at the very instant the last timer fired (set after
// it, from outside a Fire) is armed anew and fires: the spent timer does
// not stand for it (a lost wake-up).
func TestDueAtTheSpentInstantFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		seen := make(chan string, 8)
		h := New(Config{Clock: realClock{}, Store: memlease.New()})
		at := time.Now().Add(time.Second)
		a := &entry{name: "a", due: at, log: &log, seen: seen}
		b := &entry{name: "b", log: &log, seen: seen}
		h.Fix(a)
		stop := run(h)
		defer stop()
		await(seen, "a fired")
		h.Do(func() { b.due = at; h.Fix(b) }) // due when the spent timer was
		select {
		case <-seen:
		case <-time.After(time.Minute):
			t.Fatalf("b, due at the instant the last timer fired, did not fire: %q", log)
		}
	})
}

// MaxCalls calls at most run at once, whatever order calls and answers
// come in.
func TestNeverMoreThanMaxCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, st, e, stop := blocked(2)
		defer stop()
		h.Do(func() {
			for i := range 5 {
				h.Call(e, 0, string(rune('a'+i)), election.Op{ID: uint64(i + 1), Kind: election.OpGet}, 0)
			}
		})
		synctest.Wait()
		if got := len(st.started); got != 2 {
			t.Fatalf("%d calls started with MaxCalls 2", got)
		}
		st.release <- struct{}{} // one answers: one more starts, not two
		synctest.Wait()
		if got := len(st.started); got != 3 {
			t.Fatalf("%d calls started (of them 1 answered) with MaxCalls 2; want 3", got)
		}
		close(st.release)
	})
}

// deafStore answers a call only once the test lets it, whatever its
// context says: an SDK deep in a retry that ignores cancellation.
type deafStore struct {
	lease.Store
	release chan struct{}
}

func (s deafStore) Get(_ context.Context, name string) (lease.Record, lease.Version, error) {
	<-s.release
	return s.Store.Get(context.Background(), name)
}

// Calls abandoned in one event are answered once it is over, cancelled,
// in the order they were given up: not when (nor in the order) their
// goroutines return, which a store may put off. Their own answers, later,
// are dropped.
func TestAbandonedAnsweredInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := deafStore{Store: memlease.New(), release: make(chan struct{})}
		h := New(Config{Clock: realClock{}, Store: st})
		e := &entry{name: "e", log: new([]string)}
		stop := run(h)
		var fs []*Flight
		h.Do(func() {
			for i, name := range []string{"a", "b", "c"} {
				fs = append(fs, h.Call(e, 0, name, election.Op{ID: uint64(i + 1), Kind: election.OpGet}, 0))
			}
		})
		h.Do(func() { h.Cancel(fs[2]); h.Cancel(fs[0]) })
		synctest.Wait()
		if want := []string{"e answered c", "e answered a"}; !slices.Equal(*e.log, want) {
			t.Fatalf("answers %q after the cancels, want %q", *e.log, want)
		}
		for _, res := range e.res {
			if !errors.Is(res.Err, context.Canceled) {
				t.Errorf("an abandoned call answered %v, want context.Canceled", res.Err)
			}
		}
		close(st.release)
		synctest.Wait()
		stop()
		if want := []string{"e answered c", "e answered a", "e answered b"}; !slices.Equal(*e.log, want) {
			t.Errorf("answers %q once the store answered, want %q", *e.log, want)
		}
	})
}
