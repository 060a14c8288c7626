package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/tenure-go/tenure/fencing"
)

func TestGuardRejectsStaleToken(t *testing.T) {
	var g fencing.Guard
	if err := g.Do("a", 5, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	ran := false
	err := g.Do("a", 4, func() error { ran = true; return nil })
	if ran {
		t.Error("the action ran for a stale token")
	}
	if !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Do with a stale token: %v, want ErrStaleToken", err)
	}
	var se *fencing.StaleTokenError
	if !errors.As(err, &se) {
		t.Fatalf("%v is not a *StaleTokenError", err)
	}
	if se.Lease != "a" || se.Presented != 4 || se.Current != 5 {
		t.Errorf("StaleTokenError = %+v, want lease a, presented 4, current 5", *se)
	}
	if got, want := err.Error(), `fencing: lease "a": token 4 is stale, token 5 was already accepted`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if h := g.Highest("a"); h != 5 {
		t.Errorf("a stale token moved Highest to %d", h)
	}
}

// Renewals keep their token, so the same token is accepted again, and a
// higher one always is.
func TestGuardAcceptsEqualAndHigher(t *testing.T) {
	var g fencing.Guard
	var ran []fencing.Token
	for _, tok := range []fencing.Token{1, 1, 2, 2, 10} {
		if err := g.Do("a", tok, func() error { ran = append(ran, tok); return nil }); err != nil {
			t.Fatalf("Do(%d): %v", tok, err)
		}
	}
	if want := []fencing.Token{1, 1, 2, 2, 10}; !slices.Equal(ran, want) {
		t.Errorf("actions ran for %v, want %v", ran, want)
	}
	if h := g.Highest("a"); h != 10 {
		t.Errorf("Highest = %d, want 10", h)
	}
}

func TestGuardLeasesIndependent(t *testing.T) {
	var g fencing.Guard
	if h := g.Highest("a"); h != 0 {
		t.Fatalf("Highest of an unseen lease = %d, want 0", h)
	}
	noop := func() error { return nil }
	if err := g.Do("a", 9, noop); err != nil {
		t.Fatal(err)
	}
	if err := g.Do("b", 1, noop); err != nil {
		t.Fatalf("a token for lease b was judged against lease a: %v", err)
	}
	if err := g.Do("a", 8, noop); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Do(a, 8) after lease b moved on: %v, want ErrStaleToken", err)
	}
	if ha, hb := g.Highest("a"), g.Highest("b"); ha != 9 || hb != 1 {
		t.Errorf("Highest(a), Highest(b) = %d, %d; want 9, 1", ha, hb)
	}
}

// Once a token is presented the resource may have seen its write, so the
// token stays accepted even if the action fails.
func TestGuardActionErrorStillAdvances(t *testing.T) {
	var g fencing.Guard
	errDisk := errors.New("disk full")
	if err := g.Do("a", 3, func() error { return errDisk }); !errors.Is(err, errDisk) {
		t.Fatalf("Do returned %v, want the action's error", err)
	}
	if err := g.Do("a", 2, func() error { return nil }); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("Do(2) after a failed Do(3): %v, want ErrStaleToken", err)
	}
}

func TestGuardZeroToken(t *testing.T) {
	var g fencing.Guard
	ran := false
	if err := g.Do("a", 0, func() error { ran = true; return nil }); err == nil {
		t.Fatal("Do accepted token 0")
	}
	if ran || g.Highest("a") != 0 {
		t.Fatalf("token 0 ran the action (%t) or moved Highest to %d", ran, g.Highest("a"))
	}
}

// A panicking action must not leave the Guard locked.
func TestGuardActionPanics(t *testing.T) {
	var g fencing.Guard
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the action's panic did not reach the caller")
			}
		}()
		_ = g.Do("a", 4, func() error { panic("boom") })
	}()
	if err := g.Do("a", 4, func() error { return nil }); err != nil {
		t.Fatalf("Do after a panic: %v", err)
	}
}

// Many writers with interleaved tokens race on a few leases. Per lease, the
// actions that ran must see tokens in non-decreasing order and Highest must
// never go back; a Guard that checked and acted under separate locks would
// let a stale writer act after a newer one.
func TestGuardConcurrent(t *testing.T) {
	var g fencing.Guard
	leases := []string{"a", "b", "c"}
	const writers, calls = 32, 50

	var logMu sync.Mutex // guards ran; its own lock so a broken Guard shows as disorder, not only as a race
	ran := map[string][]fencing.Token{}
	type outcome struct {
		lease    string
		token    fencing.Token
		accepted bool
		err      error
	}
	outcomes := make([][]outcome, writers)

	done := make(chan struct{})
	var watch sync.WaitGroup
	watchErrs := make(chan error, len(leases))
	for _, l := range leases {
		watch.Go(func() {
			var last fencing.Token
			for {
				h := g.Highest(l)
				if h < last {
					watchErrs <- fmt.Errorf("Highest(%s) went back from %d to %d", l, last, h)
					return
				}
				last = h
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range calls {
				l := leases[(w+i)%len(leases)]
				// Tokens rise slowly overall, with writers lagging by up
				// to 20, so many are stale when they arrive.
				tok := fencing.Token(i + (w*7)%21 + 1)
				accepted := false
				err := g.Do(l, tok, func() error {
					accepted = true
					runtime.Gosched() // widen any gap between the check and the effect
					logMu.Lock()
					ran[l] = append(ran[l], tok)
					logMu.Unlock()
					return nil
				})
				outcomes[w] = append(outcomes[w], outcome{l, tok, accepted, err})
			}
		})
	}
	wg.Wait()
	close(done)
	watch.Wait()
	close(watchErrs)
	for err := range watchErrs {
		t.Error(err)
	}

	highest := map[string]fencing.Token{}
	stale := 0
	for _, ws := range outcomes {
		for _, o := range ws {
			highest[o.lease] = max(highest[o.lease], o.token)
			var se *fencing.StaleTokenError
			switch {
			case o.accepted && o.err == nil:
			case !o.accepted && errors.As(o.err, &se):
				stale++
				if se.Presented != o.token || se.Current <= o.token || se.Lease != o.lease {
					t.Errorf("Do(%s, %d): %+v", o.lease, o.token, *se)
				}
			default:
				t.Errorf("Do(%s, %d): accepted=%t, err=%v", o.lease, o.token, o.accepted, o.err)
			}
		}
	}
	if stale == 0 {
		t.Error("no writer was stale: the test did not exercise the guard")
	}
	for _, l := range leases {
		log := ran[l]
		for i := 1; i < len(log); i++ {
			if log[i] < log[i-1] {
				t.Errorf("lease %s: action %d of %d ran with token %d after one with token %d", l, i+1, len(log), log[i], log[i-1])
				break
			}
		}
		// The highest token presented is never stale, so it ran last.
		if len(log) == 0 || log[len(log)-1] != highest[l] || g.Highest(l) != highest[l] {
			t.Errorf("lease %s: highest presented %d, Highest %d, last action %v", l, highest[l], g.Highest(l), log[max(len(log)-1, 0):])
		}
	}
}

// Actions of the current term run together under DoShared: each of these
// waits until all are inside, which would never happen if they ran one at a
// time (synctest reports that as a deadlock).
func TestGuardDoSharedRunsCurrentTermConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		if err := g.Do("a", 3, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		const n = 4
		var inside sync.WaitGroup
		inside.Add(n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				err := g.DoShared("a", 3, func() error {
					inside.Done()
					inside.Wait()
					return nil
				})
				if err != nil {
					t.Errorf("DoShared(a, 3): %v", err)
				}
			})
		}
		wg.Wait()
	})
}

// The first action of a newer term waits for the running actions of the older
// one, runs alone, and from then on the older term is refused, including the
// actions that arrived while it waited.
func TestGuardDoSharedNewTermWaitsForOldOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		var mu sync.Mutex // guards log
		var log []string
		record := func(s string) {
			mu.Lock()
			log = append(log, s)
			mu.Unlock()
		}

		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = g.DoShared("a", 1, func() error {
				record("old starts")
				<-release
				record("old ends")
				return nil
			})
		})
		synctest.Wait()
		var newErr, lateErr error
		wg.Go(func() {
			newErr = g.DoShared("a", 2, func() error { record("new"); return nil })
		})
		synctest.Wait()
		wg.Go(func() {
			lateErr = g.DoShared("a", 1, func() error { record("late old"); return nil })
		})
		synctest.Wait()
		if h := g.Highest("a"); h != 1 {
			t.Errorf("Highest = %d while the old term's action runs, want 1", h)
		}
		close(release)
		wg.Wait()

		if want := []string{"old starts", "old ends", "new"}; !slices.Equal(log, want) {
			t.Errorf("actions ran as %q, want %q", log, want)
		}
		if newErr != nil {
			t.Errorf("DoShared(a, 2): %v", newErr)
		}
		var se *fencing.StaleTokenError
		if !errors.As(lateErr, &se) || se.Presented != 1 || se.Current != 2 {
			t.Errorf("DoShared(a, 1) queued behind token 2: %v, want a StaleTokenError 1 < 2", lateErr)
		}
	})
}

// Do excludes DoShared's actions, and a panic in either leaves the Guard
// usable.
func TestGuardDoExcludesDoShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		release := make(chan struct{})
		var running atomic.Int32
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = g.Do("a", 1, func() error {
				running.Add(1)
				<-release
				running.Add(-1)
				return nil
			})
		})
		synctest.Wait()
		wg.Go(func() {
			_ = g.DoShared("b", 1, func() error {
				if running.Load() != 0 {
					t.Error("DoShared's action ran while Do's was running")
				}
				return nil
			})
		})
		synctest.Wait()
		close(release)
		wg.Wait()

		func() {
			defer func() { _ = recover() }()
			_ = g.DoShared("b", 1, func() error { panic("boom") })
		}()
		if err := g.Do("b", 1, func() error { return nil }); err != nil {
			t.Fatalf("Do after a panicking DoShared: %v", err)
		}
	})
}

// Writers race with DoShared and Do and interleaved tokens on a few leases.
// Per lease, every action must start with a token no lower than any action
// that started before it, and never while an action of another token runs.
func TestGuardDoSharedConcurrent(t *testing.T) {
	var g fencing.Guard
	leases := []string{"a", "b"}
	const writers, calls = 24, 60

	type state struct {
		mu      sync.Mutex
		started fencing.Token         // highest token that started an action
		running map[fencing.Token]int // actions running, by token
	}
	states := map[string]*state{}
	for _, l := range leases {
		states[l] = &state{running: map[fencing.Token]int{}}
	}
	var accepted, stale atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range calls {
				l := leases[(w+i)%len(leases)]
				tok := fencing.Token(i/3 + (w*5)%11 + 1)
				s := states[l]
				action := func() error {
					s.mu.Lock()
					if tok < s.started {
						t.Errorf("lease %s: token %d started after token %d", l, tok, s.started)
					}
					for other, n := range s.running {
						if n > 0 && other != tok {
							t.Errorf("lease %s: token %d started while %d actions of token %d run", l, tok, n, other)
						}
					}
					s.started = max(s.started, tok)
					s.running[tok]++
					s.mu.Unlock()
					runtime.Gosched()
					s.mu.Lock()
					s.running[tok]--
					s.mu.Unlock()
					return nil
				}
				do := g.DoShared
				if i%7 == 0 {
					do = g.Do
				}
				switch err := do(l, tok, action); {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, fencing.ErrStaleToken):
					stale.Add(1)
				default:
					t.Errorf("Do(%s, %d): %v", l, tok, err)
				}
			}
		})
	}
	wg.Wait()
	if stale.Load() == 0 || accepted.Load() == 0 {
		t.Errorf("%d accepted, %d stale: the test did not exercise both outcomes", accepted.Load(), stale.Load())
	}
}

func TestGuardDoContext(t *testing.T) {
	var g fencing.Guard
	ran := 0
	action := func() error { ran++; return nil }

	if err := g.DoContext(context.Background(), action); !errors.Is(err, fencing.ErrNoFence) {
		t.Errorf("DoContext without a fence: %v, want ErrNoFence", err)
	}
	ctx := fencing.NewContext(context.Background(), fencing.Fence{Lease: "a", Token: 2})
	if err := g.DoContext(ctx, action); err != nil || ran != 1 || g.Highest("a") != 2 {
		t.Fatalf("DoContext(token 2) = %v, ran %d times, Highest %d", err, ran, g.Highest("a"))
	}

	// A term that ended while its writer waited does not act, and its
	// token is not recorded.
	ended, cancel := context.WithCancel(fencing.NewContext(context.Background(), fencing.Fence{Lease: "a", Token: 3}))
	cancel()
	if err := g.DoContext(ended, action); !errors.Is(err, context.Canceled) || ran != 1 || g.Highest("a") != 2 {
		t.Errorf("DoContext with a done context = %v, ran %d times, Highest %d; want context.Canceled, 1, 2", err, ran, g.Highest("a"))
	}

	old := fencing.NewContext(context.Background(), fencing.Fence{Lease: "a", Token: 1})
	if err := g.DoContext(old, action); !errors.Is(err, fencing.ErrStaleToken) || ran != 1 {
		t.Errorf("DoContext(token 1) after 2 = %v, ran %d times; want ErrStaleToken, 1", err, ran)
	}
	zero := fencing.NewContext(context.Background(), fencing.Fence{Lease: "a"})
	if err := g.DoContext(zero, action); err == nil || ran != 1 {
		t.Errorf("DoContext(token 0) = %v, ran %d times; want an error", err, ran)
	}
}

// Highest may be read from inside an action, which sees its own token.
func TestGuardHighestFromAction(t *testing.T) {
	var g fencing.Guard
	var seen fencing.Token
	if err := g.Do("a", 4, func() error { seen = g.Highest("a"); return nil }); err != nil {
		t.Fatal(err)
	}
	if seen != 4 {
		t.Errorf("Highest inside the action = %d, want 4", seen)
	}
}

func BenchmarkGuardDo(b *testing.B) {
	var g fencing.Guard
	noop := func() error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = g.Do("bench", 7, noop)
	}
}

func BenchmarkGuardDoSharedParallel(b *testing.B) {
	var g fencing.Guard
	noop := func() error { return nil }
	_ = g.Do("bench", 7, noop)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = g.DoShared("bench", 7, noop)
		}
	})
}

// Token 0 is refused by every entry point, even before any token was seen.
func TestGuardZeroTokenEverywhere(t *testing.T) {
	var g fencing.Guard
	ran := false
	act := func() error { ran = true; return nil }
	if err := g.DoShared("a", 0, act); err == nil {
		t.Error("DoShared accepted token 0")
	}
	if err := g.DoContext(fencing.NewContext(context.Background(), fencing.Fence{Lease: "a"}), act); err == nil {
		t.Error("DoContext accepted token 0")
	}
	if ran || g.Highest("a") != 0 {
		t.Fatalf("token 0 ran the action (%t) or moved Highest to %d", ran, g.Highest("a"))
	}
}

// Within one term, DoShared waits while a Do of the same lease and token
// runs: Do's action runs alone.
func TestGuardDoSharedWaitsForDoOfSameTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		release := make(chan struct{})
		var doing atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = g.Do("a", 1, func() error {
				doing.Store(true)
				<-release
				doing.Store(false)
				return nil
			})
		})
		synctest.Wait()
		ran := make(chan bool, 1)
		wg.Go(func() {
			_ = g.DoShared("a", 1, func() error { ran <- doing.Load(); return nil })
		})
		synctest.Wait()
		select {
		case <-ran:
			t.Fatal("DoShared's action ran while Do's of the same term was running")
		default:
		}
		close(release)
		wg.Wait()
		if during := <-ran; during {
			t.Fatal("DoShared's action overlapped Do's")
		}
	})
}

// A shared caller of an old term does not overtake a newer token waiting
// for the Guard: it waits behind it and is then refused as stale.
func TestGuardOldSharedDoesNotOvertakeWaitingNewTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		release := make(chan struct{})
		var mu sync.Mutex
		var log []string
		record := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = g.DoShared("a", 1, func() error { record("old"); <-release; return nil })
		})
		synctest.Wait()
		wg.Go(func() { _ = g.Do("a", 2, func() error { record("new"); return nil }) })
		synctest.Wait()
		var lateErr error
		wg.Go(func() { lateErr = g.DoShared("a", 1, func() error { record("late old"); return nil }) })
		synctest.Wait()
		close(release)
		wg.Wait()
		if want := []string{"old", "new"}; !slices.Equal(log, want) {
			t.Fatalf("actions ran as %q, want %q", log, want)
		}
		var se *fencing.StaleTokenError
		if !errors.As(lateErr, &se) {
			t.Fatalf("late old call: %v, want a StaleTokenError", lateErr)
		}
	})
}

// DoContext refuses a context whose term is over by its own clock
// (fencing.WithTerm), even before the context is cancelled.
func TestGuardDoContextChecksTheTerm(t *testing.T) {
	var g fencing.Guard
	over := false
	ctx := fencing.WithTerm(fencing.NewContext(context.Background(), fencing.Fence{Lease: "a", Token: 3}), func() error {
		if over {
			return context.Canceled
		}
		return nil
	})
	if err := g.DoContext(ctx, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	over = true
	ran := false
	if err := g.DoContext(ctx, func() error { ran = true; return nil }); err == nil || ran {
		t.Fatalf("DoContext after the term ended: %v, ran %t", err, ran)
	}
	if err := fencing.Err(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v", err)
	}
}

// TestDoSharedOldTermDoesNotOvertakeNewTerm: while a new term's first
// action waits for the old term's running actions, an old-term DoShared
// arriving later does not run ahead of it: it queues, and is refused once
// the new term has advanced the lease.
func TestDoSharedOldTermDoesNotOvertakeNewTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		_ = g.DoShared("l", 1, func() error { return nil }) // term 1's first action, alone
		release := make(chan struct{})
		go func() { _ = g.DoShared("l", 1, func() error { <-release; return nil }) }() // then shared
		synctest.Wait()
		newRan := make(chan struct{})
		go func() { _ = g.DoShared("l", 2, func() error { close(newRan); return nil }) }()
		synctest.Wait() // the new term waits for the old one's action
		var oldRan atomic.Bool
		errc := make(chan error, 1)
		go func() { errc <- g.DoShared("l", 1, func() error { oldRan.Store(true); return nil }) }()
		synctest.Wait()
		if oldRan.Load() {
			t.Fatal("an old term's action ran while a new term waited")
		}
		close(release)
		<-newRan
		var stale *fencing.StaleTokenError
		if err := <-errc; !errors.As(err, &stale) || oldRan.Load() {
			t.Fatalf("the old term's late action: %v (ran: %v), want refused as stale", err, oldRan.Load())
		}
	})
}
