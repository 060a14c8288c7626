package fencing_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

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
