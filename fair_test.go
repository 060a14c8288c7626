package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// Fair waiters get a held lock in the order they came, each from another
// process, and leave the queue empty behind them.
func TestFairLockFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memlease.New()
		holder := newLocker(t, store, "holder")
		h, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for i := range 4 {
			id := fmt.Sprintf("w%d", i+1)
			l := newLocker(t, store, id)
			wg.Go(func() {
				h, err := l.Lock(ctx, "job", tenure.Fair())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, id)
				mu.Unlock()
				wait(500 * time.Millisecond)
				h.Unlock(ctx)
			})
			wait(300 * time.Millisecond) // w1 queues first, then w2, …
		}
		wait(5 * time.Second)
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if fmt.Sprint(order) != "[w1 w2 w3 w4]" {
			t.Fatalf("granted in the order %v", order)
		}
		wait(5 * time.Second)
		q, _, err := store.Get(ctx, "job::queue")
		if err != nil || len(q.Payload) != 0 {
			t.Fatalf("queue left behind: %q, %v", q.Payload, err)
		}
	})
}

// A fair waiter that went silent (crashed) is skipped once the next one has
// seen its entry unchanged for the lease stretched by ρ; a waiter that gives
// up leaves the queue.
func TestFairLockSkipsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memlease.New()
		holder := newLocker(t, mem, "holder")
		h, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		crashed := leasetest.NewFaults(mem)
		go newLocker(t, crashed, "crashed").Lock(ctx, "job", tenure.Fair())
		wait(time.Second)
		crashed.FailAll() // its entry stays in the queue, unchanged
		quitter := newLocker(t, mem, "quitter")
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := quitter.Lock(short, "job", tenure.Fair()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a fair Lock with a deadline: %v", err)
		}
		next := newLocker(t, mem, "next")
		got := make(chan time.Time)
		go func() {
			if _, err := next.Lock(ctx, "job", tenure.Fair()); err != nil {
				t.Error(err)
			}
			got <- time.Now()
		}()
		wait(time.Second)
		released := time.Now()
		h.Unlock(ctx)
		at := <-got
		// The crashed waiter's last beat was seen at most 2s before it went
		// silent: it is skipped no sooner than 10.01s after that. next may
		// have joined behind the quitter's entry, not yet dropped, and read
		// that slot every FarWatch polls (6s) before it moved up and first
		// saw the crashed waiter's: then 1 + 6 + 10.01s after the release.
		if d := at.Sub(released); d < 5*time.Second || d > 17100*time.Millisecond {
			t.Fatalf("next got the lock %v after the release", d)
		}
		crashed.Heal()
	})
}

// A waiter that gives up while its queue heartbeat is in flight still leaves
// the queue: the heartbeat, landing after the decision, is followed by the
// write that drops the entry. No other waiter is there to skip it.
func TestFairLockGiveUpDuringHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memlease.New()
		holder := newLocker(t, mem, "holder")
		h, err := holder.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		faults := leasetest.NewFaults(mem)
		held, release := make(chan struct{}), make(chan struct{})
		puts := 0
		faults.SetHook(func(op, name string) error {
			if op == "put" && name == "job::queue.0" {
				if puts++; puts == 1 { // the first heartbeat after the ticket
					close(held)
					<-release
				}
			}
			return nil
		})
		quitter := newLocker(t, faults, "quitter")
		short, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() {
			_, err := quitter.Lock(short, "job", tenure.Fair())
			done <- err
		}()
		<-held
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Lock after its context was cancelled: %v", err)
		}
		close(release)
		wait(time.Second)
		q, _, err := mem.Get(ctx, "job::queue")
		if err != nil || len(q.Payload) != 0 {
			t.Fatalf("the quitter's entry stayed in the queue: %q, %v", q.Payload, err)
		}
		h.Unlock(ctx)
	})
}
