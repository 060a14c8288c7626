package tenure_test

// Behaviours that no other test pinned: each test here fails when the
// behaviour it names is broken, so that the code can move (onto one host)
// without losing any of them.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// heldThenCutOff takes lock "x" with a Locker whose store then fails every
// call.
func heldThenCutOff(t *testing.T) (*leasetest.Faults, *tenure.Lock) {
	t.Helper()
	f := leasetest.NewFaults(memlease.New())
	h, err := newLocker(t, f, "a").TryLock(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	f.FailAll()
	return f, h
}

// A held lock's context is cancelled at its deadline when renewals fail,
// also while its release keeps failing (the release waits ReleaseTimeout).
func TestLockContextEndsAtDeadlineWhileReleaseFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, h := heldThenCutOff(t)
		deadline := h.Deadline()
		<-h.Context().Done()
		if late := time.Since(deadline); late > 0 {
			t.Fatalf("the lock's context ended %v after its deadline", late)
		}
	})
}

// WithLeaseDuration alone sets the lock's lease, and the lock keeps the
// Locker's MaxDrift: its deadline is the lease × (1-ρ) less the margin.
func TestWithLeaseDurationAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlease.New()
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "a"}, Timing: tenure.Timing{MaxDrift: 0.01}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		start := time.Now()
		h, err := l.TryLock(context.Background(), "x", tenure.WithLeaseDuration(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rec, _, _ := store.Get(context.Background(), "x")
		if rec.Duration != 3*time.Second {
			t.Errorf("the record's lease is %v, want 3s", rec.Duration)
		}
		// 3s × (1-0.01) less the margin of 3s/10.
		if got, want := h.Deadline().Sub(start), 2970*time.Millisecond-300*time.Millisecond; got != want {
			t.Errorf("deadline %v after taking the lock, want %v (MaxDrift 0.01 kept)", got, want)
		}
	})
}

// A lock lost (its renewals failed past the deadline) is not taken again by
// itself once the store heals: its caller must ask again.
func TestLostLockDoesNotCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, h := heldThenCutOff(t)
		<-h.Context().Done()
		wait(10 * time.Second) // the release gives up
		f.Heal()
		_, puts := f.Counts()
		wait(time.Minute)
		if _, after := f.Counts(); after != puts {
			t.Fatalf("%d writes after the lock was lost and the store healed: it campaigned again", after-puts)
		}
	})
}

// A fair TryLock never waits in the queue: it answers at once, and writes
// no queue record.
func TestFairTryLockDoesNotQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlease.New()
		a, b := newLocker(t, store, "a"), newLocker(t, store, "b")
		if _, err := a.TryLock(context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := b.TryLock(context.Background(), "x", tenure.Fair()); !errors.Is(err, tenure.ErrLocked) || time.Since(start) != 0 {
			t.Fatalf("fair TryLock of a held lock: %v after %v", err, time.Since(start))
		}
		if _, _, err := store.Get(context.Background(), "x::queue"); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("a queue record was written: %v", err)
		}
	})
}

// TryLock against a failing store returns the store's error, at once.
func TestTryLockReturnsStoreError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := leasetest.NewFaults(memlease.New())
		f.FailAll()
		l := newLocker(t, f, "a")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := l.TryLock(ctx, "x")
		if !errors.Is(err, leasetest.ErrInjected) || errors.Is(err, tenure.ErrLocked) {
			t.Fatalf("TryLock on a failing store: %v, want the store's error", err)
		}
	})
}

// A lock granted after its caller gave up is given back.
func TestLockGrantedAfterCallerGaveUpIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlease.New()
		ctx, cancel := context.WithCancel(context.Background())
		// The write lands; its answer comes after the caller gave up.
		l := newLocker(t, afterPut{Store: store, then: func() { cancel(); wait(time.Millisecond) }}, "a")
		if _, err := l.Lock(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock: %v, want the context's error", err)
		}
		wait(time.Second)
		rec, _, err := store.Get(context.Background(), "x")
		if err != nil || !rec.Released {
			t.Fatalf("the record after the caller gave up: %+v, %v; want it given back", rec, err)
		}
	})
}

// afterPut runs then once the first Put has been applied, before it
// answers.
type afterPut struct {
	lease.Store
	then func()
}

func (a afterPut) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	v, err := a.Store.Put(context.WithoutCancel(ctx), name, rec, expect)
	if a.then != nil && !rec.Released {
		a.then()
	}
	return v, err
}

// Store calls that time out are cancelled: the store sees its context end
// at the OpTimeout, for a Candidate's calls and a Locker's.
func TestTimedOutCallsAreCancelled(t *testing.T) {
	for _, who := range []string{"candidate", "locker"} {
		t.Run(who, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := leasetest.NewFaults(memlease.New())
				var hung, cancelled atomic.Int32
				block := make(chan struct{})
				store := ctxStore{Store: f, get: func(ctx context.Context) {
					hung.Add(1)
					select {
					case <-ctx.Done():
						cancelled.Add(1)
					case <-block:
					}
				}}
				if who == "candidate" {
					run(t, newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a"}}), context.Background())
				} else {
					l := newLocker(t, store, "a")
					go func() { _, _ = l.Lock(context.Background(), "x") }()
				}
				wait(2*time.Second + time.Millisecond) // the default OpTimeout, at the 10s lease
				if hung.Load() == 0 || cancelled.Load() == 0 {
					t.Fatalf("%d calls hung, %d cancelled by their OpTimeout", hung.Load(), cancelled.Load())
				}
				close(block)
			})
		})
	}
}

// ctxStore runs get with each Get's context before the call.
type ctxStore struct {
	lease.Store
	get func(ctx context.Context)
}

func (s ctxStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	s.get(ctx)
	if err := ctx.Err(); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return s.Store.Get(ctx, name)
}

// permanentAfter answers reads as its store does n times, then fails every
// call with a permanent error.
type permanentAfter struct {
	lease.Store
	mu    sync.Mutex
	reads int
	n     int
}

func (p *permanentAfter) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	p.mu.Lock()
	p.reads++
	ok := p.reads <= p.n
	p.mu.Unlock()
	if ok {
		return p.Store.Get(ctx, name)
	}
	return lease.Record{}, lease.NoVersion, lease.Permanent(fmt.Errorf("get lease %q: access denied", name))
}

// A permanent error before the store ever answered a read ends Run at once;
// one after a read was answered (not found counts) is retried.
func TestPermanentErrorAtFirstAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan error, 1)
		c := newCandidate(t, tenure.Config{Store: &permanentAfter{Store: memlease.New()}, Runtime: tenure.Runtime{ID: "a"}})
		go func() { done <- c.Run(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, lease.ErrPermanent) {
				t.Fatalf("Run: %v, want the permanent error", err)
			}
		default:
			t.Fatal("Run goes on after a permanent error at its first answer")
		}

		// Another holds the lease: the first read answers, later ones fail.
		store := memlease.New()
		if _, err := store.Put(context.Background(), leaseName, lease.Record{Holder: "b", Token: 1, Duration: time.Hour, Nonce: "n"}, lease.NoVersion); err != nil {
			t.Fatal(err)
		}
		c = newCandidate(t, tenure.Config{Store: &permanentAfter{Store: store, n: 1}, Runtime: tenure.Runtime{ID: "a"}})
		stop := run(t, c, context.Background())
		wait(time.Minute)
		if c.Status().Err == nil || !errors.Is(c.Status().Err, lease.ErrPermanent) {
			t.Fatalf("Status().Err = %v, want the permanent error kept", c.Status().Err)
		}
		if err := stop(); err != nil && !errors.Is(err, tenure.ErrReleaseUnconfirmed) {
			t.Fatalf("Run after a permanent error on a store that had answered: %v, want it retried until stopped", err)
		}
	})
}

// OnLeaderChange is not called again after it panicked, though the
// leader changed again before Run ended.
func TestOnLeaderChangeNotCalledAfterPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		store := memlease.New()
		stopB := run(t, newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "b"}}), context.Background())
		synctest.Wait()
		c := newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a"}, Callbacks: tenure.Callbacks{
			OnLeaderChange: func(tenure.Leader) {
				if calls.Add(1) == 1 {
					_ = stopB()           // the leader leaves: a change is pending
					wait(5 * time.Second) // and seen while this call runs
					panic("boom")
				}
			},
		}})
		paniced := make(chan any, 1)
		go func() {
			defer func() { paniced <- recover() }()
			_ = c.Run(context.Background())
		}()
		if p := <-paniced; p == nil {
			t.Fatal("Run did not panic")
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("OnLeaderChange called %d times, want once", n)
		}
	})
}

// fencing.Err on a context derived from a term's reports the term over as
// soon as the clock has passed its deadline, before the loop has run (a
// process resumed from a pause).
func TestDerivedContextSeesDeadlineAfterPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &pausable{}
		terms := make(chan context.Context, 1)
		c := newCandidate(t, tenure.Config{Store: memlease.New(), Runtime: tenure.Runtime{ID: "a", Clock: clk}, Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, _ tenure.Term) { terms <- ctx; <-ctx.Done() },
		}})
		run(t, c, context.Background())
		derived, cancel := context.WithCancel(<-terms)
		defer cancel()
		if err := fencing.Err(derived); err != nil {
			t.Fatalf("fencing.Err while leading: %v", err)
		}
		clk.jump(time.Minute) // the process was paused: no timer has fired
		if err := fencing.Err(derived); err == nil {
			t.Fatal("fencing.Err after a pause past the deadline: nil, want the term over")
		}
	})
}

// pausable is a clock whose reading can jump ahead while its timers do
// not fire: what a paused process sees on waking, before anything ran.
type pausable struct {
	mu  sync.Mutex
	off time.Duration
}

func (p *pausable) jump(d time.Duration) { p.mu.Lock(); p.off += d; p.mu.Unlock() }

func (p *pausable) Now() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Add(p.off)
}

func (p *pausable) After(d time.Duration) <-chan time.Time { return time.After(d) }

// A fair waiter's calls on its queue are bounded by the lock's OpTimeout:
// the store sees a deadline on each.
func TestQueueCallsBoundedByOpTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var unbounded, calls atomic.Int32
		store := deadlineStore{Store: memlease.New(), check: func(ctx context.Context, name string) {
			if _, ok := ctx.Deadline(); strings.Contains(name, "::queue") {
				calls.Add(1)
				if !ok {
					unbounded.Add(1)
				}
			}
		}}
		l := newLocker(t, store, "a")
		h, err := l.Lock(context.Background(), "x", tenure.Fair())
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Unlock(context.Background())
		if calls.Load() == 0 || unbounded.Load() != 0 {
			t.Fatalf("%d of %d queue calls had no deadline", unbounded.Load(), calls.Load())
		}
	})
}

// deadlineStore runs check with each call's context.
type deadlineStore struct {
	lease.Store
	check func(ctx context.Context, name string)
}

func (s deadlineStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	s.check(ctx, name)
	return s.Store.Get(ctx, name)
}

func (s deadlineStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	s.check(ctx, name)
	return s.Store.Put(ctx, name, rec, expect)
}

// WithLeaseDuration keeps the timings the Locker was given, and derives
// only the others from the lock's lease; a given timing that does not fit
// the lease is refused, not dropped.
func TestWithLeaseDurationKeepsGivenTimings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlease.New()
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "a"}, Timing: tenure.Timing{Margin: 500 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		start := time.Now()
		h, err := l.TryLock(context.Background(), "x", tenure.WithLeaseDuration(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// 20s × (1-1e-3) less the given margin of 0.5s, not the derived 2s.
		if got, want := h.Deadline().Sub(start), 19980*time.Millisecond-500*time.Millisecond; got != want {
			t.Errorf("deadline %v after taking the lock, want %v (the Locker's Margin kept)", got, want)
		}
		_ = h.Unlock(context.Background())
		l2, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "b"}, Timing: tenure.Timing{RenewInterval: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		var fe *tenure.FieldError
		if _, err := l2.TryLock(context.Background(), "y", tenure.WithLeaseDuration(time.Second)); !errors.As(err, &fe) || fe.Field != "RenewInterval" {
			t.Errorf("a 1s lease with the Locker's 2s RenewInterval: %v, want a FieldError naming RenewInterval", err)
		}
	})
}
