package tenure_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// priority sets a candidate's Priority, and no wake-up listener: a socket
// is not something a synctest bubble can wait on.
func priority(p int) func(*tenure.Config) {
	return func(c *tenure.Config) { c.Priority, c.WakeAddr = p, tenure.NoWake }
}

// handovers returns the terms that ended by a hand-over.
func handovers(ts []term) []term {
	var out []term
	for _, t := range ts {
		if t.reason == tenure.ReasonHandedOver {
			out = append(out, t)
		}
	}
	return out
}

// handedOverTo checks that the terms, at most most of them, end with
// want's, still under way, and that each before it was handed over, none
// before the hold-off (1m).
func handedOverTo(t *testing.T, ts []term, want string, most int) {
	t.Helper()
	if n := len(ts); n < 2 || n > most || ts[n-1].node != want || !ts[n-1].cancelled.IsZero() {
		t.Fatalf("terms %+v, want at most %d, a hand-over first and %s's last", ts, most, want)
	}
	for _, tm := range ts[:len(ts)-1] {
		if tm.reason != tenure.ReasonHandedOver {
			t.Fatalf("%s's term ended %v, want %v", tm.node, tm.reason, tenure.ReasonHandedOver)
		}
		if held := tm.cancelled.Sub(tm.elected); held < time.Minute {
			t.Fatalf("%s handed over %v into its term, before the hold-off", tm.node, held)
		}
	}
}

// A candidate of higher priority joins: it becomes the standby at its first
// read of the standby record, and the leader hands the lease over once its
// term is PriorityHoldOff (1m) old. The next leader takes it within a poll
// of the release: d, its standby, at its next hot poll (no WakeAddr in a
// bubble), unless a cold follower's poll finds the lease free first, as
// the rules allow; that one hands over in turn a hold-off later (the
// goroutines' order under -race makes this happen up to three times). No
// term ends any other way, and d leads in the end.
func TestPriorityHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.start("a", nil, standbyOn)
		synctest.Wait()
		w.start("b", nil, standbyOn)
		w.start("c", nil, standbyOn)
		wait(10 * time.Second)
		d := w.start("d", nil, priority(5))
		wait(8 * time.Minute)
		ts := w.snapshot()
		handedOverTo(t, ts, "d", 5)
		for i, tm := range ts[:len(ts)-1] {
			if gap := ts[i+1].elected.Sub(tm.cancelled); gap > 2200*time.Millisecond {
				t.Fatalf("%s took over %v after %s's term ended", ts[i+1].node, gap, tm.node)
			}
		}
		a := ts[0]
		var te *tenure.TermEndedError
		if err := context.Cause(a.ctx); !errors.As(err, &te) || te.Reason != tenure.ReasonHandedOver || te.Token != a.token {
			t.Fatalf("a's term context ended with %v, want a *TermEndedError for token %d, handed over", err, a.token)
		}
		if s := d.c.Status(); !s.Leading {
			t.Fatalf("d: %+v, want leading", s)
		}
	})
}

// Equal priorities never hand over, whatever their number.
func TestEqualPrioritiesNeverHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.start("a", nil, priority(3))
		synctest.Wait()
		for _, id := range []string{"b", "c", "d"} {
			w.start(id, nil, priority(3))
		}
		wait(30 * time.Minute)
		if ts := w.snapshot(); len(ts) != 1 || !ts[0].cancelled.IsZero() {
			t.Fatalf("terms %+v, want a's alone", ts)
		}
	})
}

// A preferred candidate that keeps failing to take the lease (its writes
// of the lease refused, while it stays the standby) is not waited on: the
// leader takes the lease back ResignHoldOff (4s) after its hand-over, and
// hands over at most once per PriorityHoldOff.
func TestPriorityDoesNotWaitOnAFailedCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.start("a", nil, standbyOn)
		synctest.Wait()
		d := w.start("d", nil, priority(5))
		d.faults.SetHook(func(op, name string) error {
			if op == "put" && name == leaseName {
				return leasetest.ErrInjected
			}
			return nil
		})
		wait(10 * time.Minute)
		ts := w.snapshot()
		for _, tm := range ts {
			if tm.node != "a" {
				t.Fatalf("terms %+v: only a can write the lease", ts)
			}
		}
		hs := handovers(ts)
		if len(hs) < 3 {
			t.Fatalf("%d hand-overs in 10 minutes, want one every minute or so: %+v", len(hs), ts)
		}
		for i := 1; i < len(ts); i++ {
			gap := ts[i].elected.Sub(ts[i-1].cancelled)
			if gap < 4*time.Second || gap > 5*time.Second {
				t.Fatalf("a took the lease back %v after its hand-over, want just after its Resign hold-off (4s)", gap)
			}
		}
		for _, h := range hs {
			if held := h.cancelled.Sub(h.elected); held < time.Minute {
				t.Fatalf("a handed over %v into a term, before the hold-off", held)
			}
		}
	})
}

// A leader with the defaults (no Standby, no Priority) hands the lease
// over to a preferred standby too: it reads the standby record once a
// cold poll (10 polls, 20s), and hands over once its term is
// PriorityHoldOff (1m) old. Setting Priority on the candidate to prefer is
// enough. Plain followers beside it may find the release first, as the
// rules allow, and then hand over in turn.
func TestPriorityBesideDefaultLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		w.start("a", nil)
		synctest.Wait()
		w.start("b", nil)
		wait(10 * time.Second)
		d := w.start("d", nil, priority(5))
		wait(6 * time.Minute)
		handedOverTo(t, w.snapshot(), "d", 10)
		if s := d.c.Status(); !s.Leading {
			t.Fatalf("d: %+v, want leading", s)
		}
	})
}

// What looking for a preferred standby costs a lease that never uses
// priority: its leader reads the standby record once a cold poll (20s at
// the defaults), 30 reads in 10 minutes against 300 renewals; its
// followers never read it.
func TestLookingForAPreferredStandbyCosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var mu sync.Mutex
		reads := map[string]int{}
		count := func(id string) func(*tenure.Config) {
			return func(c *tenure.Config) {
				c.Store.(*leasetest.Faults).SetHook(func(op, name string) error {
					if name == leaseName+election.StandbySuffix {
						mu.Lock()
						reads[id+" "+op]++
						mu.Unlock()
					}
					return nil
				})
			}
		}
		w.start("a", nil, count("a"))
		synctest.Wait()
		w.start("b", nil, count("b"))
		wait(10 * time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if got := reads["a get"]; got < 29 || got > 31 || len(reads) != 1 {
			t.Fatalf("calls on the standby record in 10 minutes: %v; want about 30 reads by the leader a, nothing else", reads)
		}
	})
}

// Priority turns the standby on; PriorityHoldOff defaults to the standby
// record's lease, with or without the standby; NoWake is a WakeAddr
// anywhere.
func TestPriorityConfig(t *testing.T) {
	c := tenure.Config{Lease: "job", Store: newWorld(t).store, Priority: -2}.WithDefaults()
	if !c.Standby || c.PriorityHoldOff != time.Minute {
		t.Fatalf("Priority -2: Standby %v, PriorityHoldOff %v; want on, 1m", c.Standby, c.PriorityHoldOff)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ok := range []tenure.Config{{Priority: 1, Runtime: tenure.Runtime{WakeAddr: tenure.NoWake}}, {Runtime: tenure.Runtime{WakeAddr: tenure.NoWake}}} {
		ok.Lease, ok.Store = "job", newWorld(t).store
		if err := ok.Validate(); err != nil {
			t.Fatalf("WakeAddr NoWake, Priority %d: %v", ok.Priority, err)
		}
	}
	plain := tenure.Config{Lease: "job", Store: newWorld(t).store}.WithDefaults()
	if plain.Standby || plain.PriorityHoldOff != time.Minute {
		t.Fatalf("the defaults: Standby %v, PriorityHoldOff %v; want off, 1m (a leader hands over to a preferred standby)", plain.Standby, plain.PriorityHoldOff)
	}
	if err := (tenure.Config{Lease: "job", Store: newWorld(t).store, PriorityHoldOff: time.Hour}).Validate(); err != nil {
		t.Fatalf("PriorityHoldOff without a standby: %v", err)
	}
}
