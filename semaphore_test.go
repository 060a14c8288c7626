package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// Slots(2): two callers hold a slot each, at once; a third TryLock is
// refused at once, naming both holders; each slot's token is above every
// earlier holder's of that slot; a slot given back is taken by the next.
func TestSemaphoreTryLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		a, b, c := newLocker(t, store, "a"), newLocker(t, store, "b"), newLocker(t, store, "c")
		start := time.Now()
		ha, err := a.TryLock(ctx, "db", tenure.Slots(2))
		if err != nil {
			t.Fatal(err)
		}
		hb, err := b.TryLock(ctx, "db", tenure.Slots(2))
		if err != nil {
			t.Fatal(err)
		}
		if ha.Slot() == hb.Slot() || ha.Name() != "db" || time.Since(start) != 0 {
			t.Fatalf("slots %d and %d of %q after %v", ha.Slot(), hb.Slot(), ha.Name(), time.Since(start))
		}
		_, err = c.TryLock(ctx, "db", tenure.Slots(2))
		var le *tenure.LockedError
		if !errors.Is(err, tenure.ErrLocked) || !errors.As(err, &le) || len(le.Holders) != 2 || time.Since(start) != 0 {
			t.Fatalf("TryLock with every slot held: %v", err)
		}
		for _, h := range []*tenure.Lock{ha, hb} {
			if got := le.Holders[h.Slot()]; got.Holder != map[*tenure.Lock]string{ha: "a", hb: "b"}[h] || got.Token != h.Token() {
				t.Errorf("slot %d listed as %+v", h.Slot(), got)
			}
		}
		if fence, ok := fencing.FromContext(ha.Context()); !ok || fence.Lease != fmt.Sprintf("db::slot.%d", ha.Slot()) {
			t.Errorf("a's fence: %+v", fence)
		}
		if err := ha.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		hc, err := c.TryLock(ctx, "db", tenure.Slots(2))
		if err != nil || hc.Slot() != ha.Slot() || hc.Token() <= ha.Token() {
			t.Fatalf("after a's unlock: %v (slot %d, token %d after %d)", err, hc.Slot(), hc.Token(), ha.Token())
		}
	})
}

// Every caller of a name must ask for the same number of slots.
func TestSemaphoreCountMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		a, b := newLocker(t, store, "a"), newLocker(t, store, "b")
		if _, err := a.TryLock(ctx, "db", tenure.Slots(2)); err != nil {
			t.Fatal(err)
		}
		for _, try := range []bool{true, false} {
			var err error
			if try {
				_, err = b.TryLock(ctx, "db", tenure.Slots(3))
			} else {
				_, err = b.Lock(ctx, "db", tenure.Slots(3))
			}
			if !errors.Is(err, tenure.ErrSlotsMismatch) {
				t.Fatalf("Slots(3) on a name of 2 slots (TryLock %v): %v", try, err)
			}
		}
		for _, n := range []int{0, -1, tenure.MaxSlots + 1} {
			if _, err := b.TryLock(ctx, "db", tenure.Slots(n)); err == nil {
				t.Fatalf("Slots(%d) accepted", n)
			}
		}
	})
}

// A Lock with every slot held waits, and takes the first slot given back
// within a poll; a silent holder's slot is waited out for its lease
// stretched by ρ; the waiter gives up at its deadline naming the holders.
func TestSemaphoreLockWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memlease.New()
		cut := leasetest.NewFaults(mem) // b's link to the store
		a, b, w := newLocker(t, mem, "a"), newLocker(t, cut, "b"), newLocker(t, mem, "w")
		ha, err := a.Lock(ctx, "db", tenure.Slots(2))
		if err != nil {
			t.Fatal(err)
		}
		hb, err := b.Lock(ctx, "db", tenure.Slots(2))
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = w.Lock(short, "db", tenure.Slots(2))
		cancel()
		var le *tenure.LockedError
		if !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) || len(le.Holders) != 2 {
			t.Fatalf("Lock given up: %v", err)
		}
		start := time.Now()
		go func() {
			wait(3 * time.Second)
			ha.Unlock(ctx)
		}()
		h, err := w.Lock(ctx, "db", tenure.Slots(2))
		if err != nil || h.Slot() != ha.Slot() || time.Since(start) > 3*time.Second+2200*time.Millisecond {
			t.Fatalf("after a's unlock: %v, slot %d after %v", err, h.Slot(), time.Since(start))
		}
		// b goes silent: its slot is w2's a lease × (1+ρ) after b's last
		// renewal, and b's belief ended before.
		w2 := newLocker(t, mem, "w2")
		cut.FailAll()
		start = time.Now()
		h2, err := w2.Lock(ctx, "db", tenure.Slots(2))
		if err != nil || h2.Slot() != hb.Slot() {
			t.Fatalf("b's slot: %v", err)
		}
		if hb.Context().Err() == nil {
			t.Fatal("b still believes it holds its slot")
		}
		if took := time.Since(start); took < 10*time.Second || took > 10*time.Second+4*time.Second {
			t.Fatalf("b's slot taken after %v", took)
		}
	})
}

// Fair: waiters take the slots in the order they came, across both slots.
func TestSemaphoreFair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		holders := []*tenure.Lock{}
		for _, id := range []string{"h1", "h2"} {
			h, err := newLocker(t, store, id).Lock(ctx, "db", tenure.Slots(2), tenure.Fair())
			if err != nil {
				t.Fatal(err)
			}
			holders = append(holders, h)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for i := range 4 {
			id := fmt.Sprintf("w%d", i+1)
			l := newLocker(t, store, id)
			wg.Go(func() {
				h, err := l.Lock(ctx, "db", tenure.Slots(2), tenure.Fair())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, id)
				mu.Unlock()
				wait(4 * time.Second)
				h.Unlock(ctx)
			})
			wait(300 * time.Millisecond)
		}
		wait(5 * time.Second)
		for _, h := range holders {
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wait(time.Second)
		}
		wg.Wait()
		if fmt.Sprint(order) != "[w1 w2 w3 w4]" {
			t.Fatalf("granted in the order %v", order)
		}
	})
}

// What tenure plan --slots prints for a waiter is what one makes: counted
// at the store over an hour with every slot held.
func TestSemRequestsPerHourCountsTheCadences(t *testing.T) {
	for _, fair := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			mem := memlease.New()
			opts := []tenure.LockOption{tenure.Slots(3)}
			if fair {
				opts = append(opts, tenure.Fair())
			}
			for i := range 3 {
				if _, err := newLocker(t, mem, fmt.Sprintf("h%d", i)).Lock(ctx, "pool", opts...); err != nil {
					t.Fatal(err)
				}
			}
			counted := leasetest.NewFaults(mem)
			w := newLocker(t, counted, "w")
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go w.Lock(wctx, "pool", opts...)
			wait(time.Minute) // settled
			g0, p0 := counted.Counts()
			wait(time.Hour)
			g1, p1 := counted.Counts()
			_, reads, writes := lockcore.SemRequestsPerHour(election.Timing{}.WithDefaults(), 3, 1, fair)
			got := float64(g1 - g0 + p1 - p0)
			t.Logf("fair %v: %.0f requests (%d reads); plan %.0f", fair, got, g1-g0, reads+writes)
			if want := reads + writes; got < want*0.97 || got > want*1.03 {
				t.Errorf("fair %v: a waiter made %.0f requests (%d reads) in an hour; the plan says %.0f (%.0f reads)", fair, got, g1-g0, want, reads)
			}
		})
	}
}

// A waiting Lock on a semaphore fails at once where retrying cannot help
// (the count record, or the slots' records, refused for good).
func TestSemaphoreWaitFailsFast(t *testing.T) {
	denied := fmt.Errorf("%w: access denied", lease.ErrPermanent)
	for _, c := range []struct {
		name string
		fail func(op, name string) error
		fair bool
	}{
		{"count record", func(op, name string) error {
			if name == "db::slots" {
				return denied
			}
			return nil
		}, false},
		{"count record, fair", func(op, name string) error {
			if name == "db::slots" {
				return denied
			}
			return nil
		}, true},
		{"free slots' writes", func(op, name string) error {
			if op == "put" && strings.Contains(name, "::slot.") {
				return denied
			}
			return nil
		}, false},
		{"slot records", func(op, name string) error {
			if strings.Contains(name, "::slot.") {
				return denied
			}
			return nil
		}, false},
		{"slot records, fair", func(op, name string) error {
			if strings.Contains(name, "::slot.") {
				return denied
			}
			return nil
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memlease.New()
				if !strings.HasPrefix(c.name, "free") { // else the slot is free, and w tries it
					a := newLocker(t, mem, "a")
					if _, err := a.Lock(context.Background(), "db", tenure.Slots(1)); err != nil {
						t.Fatal(err)
					}
				}
				failing := leasetest.NewFaults(mem)
				failing.SetHook(c.fail)
				w := newLocker(t, failing, "w")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				opts := []tenure.LockOption{tenure.Slots(1)}
				if c.fair {
					opts = append(opts, tenure.Fair())
				}
				start := time.Now()
				_, err := w.Lock(ctx, "db", opts...)
				if !errors.Is(err, lease.ErrPermanent) || time.Since(start) > 15*time.Second {
					t.Fatalf("Lock: %v after %v; want the permanent error within a lease", err, time.Since(start))
				}
			})
		})
	}
}
