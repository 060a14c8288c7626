package lockcore

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// newWaker starts a lock on "job" for id, with wake-up address addr.
func newWaker(t *testing.T, store lease.Store, id, addr string, fair bool) *host {
	h := &host{t: t, now: time.Unix(1e9, 0), store: store}
	cfg := election.Config{ID: id, Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h.lk = new(Lock)
	h.lk.SetWake(addr)
	if err := h.lk.Init(h, "job", &cfg, false, fair); err != nil {
		t.Fatal(err)
	}
	h.lk.Start()
	h.lk.Fire(h.now)
	return h
}

// steps answers h's calls in order, n in all; with none waiting it moves
// the clock on by tick and fires what is due.
func (h *host) steps(n int, tick time.Duration) {
	h.t.Helper()
	for range n {
		if len(h.calls) == 0 {
			h.now = h.now.Add(tick)
			h.lk.Fire(h.now)
			continue
		}
		h.next(h.calls[0].rec != RecLock)
	}
}

// pending reports whether h has a call waiting on record rec.
func (h *host) pending(rec int) bool {
	return slices.ContainsFunc(h.calls, func(c call) bool { return c.rec == rec })
}

// TestUnlockWakesTheRegisteredWaiter: a plain waiter names itself in the
// wake record once it sees a holder; the holder's unlock reads the record
// beside its release and wakes that waiter only once the release is
// confirmed, whichever answer comes first.
func TestUnlockWakesTheRegisteredWaiter(t *testing.T) {
	for _, readFirst := range []bool{true, false} {
		store := memlease.New()
		a := newWaker(t, store, "a", "a:1", false)
		a.next(false) // no record
		a.next(false) // a takes it
		if !a.lk.Held() {
			t.Fatal("a does not hold the lock")
		}
		b := newWaker(t, store, "b", "b:1", false)
		b.next(false) // b reads: held by a
		if !b.pending(RecWake) {
			t.Fatal("b does not register in the wake record")
		}
		b.next(true) // b reads the wake record: nobody is there
		b.next(true) // and registers
		rec, _, err := store.Get(context.Background(), "job"+WakeSuffix)
		if err != nil || rec.Holder != "b" || string(rec.Payload) != "b:1" {
			t.Fatalf("wake record %+v, %v; want b's, at b:1", rec, err)
		}
		a.lk.Stop()
		if !a.pending(RecWake) || !a.pending(RecLock) {
			t.Fatalf("a's unlock sends %v; want the release and the read of the wake record", a.calls)
		}
		if readFirst {
			a.next(true)
			if len(a.wakes) != 0 {
				t.Fatal("a woke b before its release was confirmed")
			}
			a.next(false)
		} else {
			a.next(false)
			if len(a.wakes) != 0 {
				t.Fatal("a woke b before it read whom to wake")
			}
			a.next(true)
		}
		if !slices.Equal(a.wakes, []string{"b:1"}) {
			t.Fatalf("a woke %v, want [b:1]", a.wakes)
		}
		// b, woken, reads the lock at once and takes it.
		if !b.lk.Wake() || !b.pending(RecLock) {
			t.Fatalf("b, woken, sends %v; want a read of the lock", b.calls)
		}
		b.next(false)
		b.next(false)
		if !b.lk.Held() {
			t.Fatal("b, woken, did not take the free lock")
		}
	}
}

// TestPlainWaitersReadBeforeTheyRegister: a plain waiter that finds
// another registered behind the same holder leaves it, without a write.
func TestPlainWaitersReadBeforeTheyRegister(t *testing.T) {
	store := &counting{Store: memlease.New()}
	if _, err := store.Put(context.Background(), "job", lease.Record{Holder: "z", Token: 1, Duration: lease.MaxDuration, Nonce: "z"}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	b := newWaker(t, store, "b", "b:1", false)
	b.steps(4, time.Millisecond) // reads the lock, reads the record, registers
	c := newWaker(t, store, "c", "c:1", false)
	puts := store.puts
	c.steps(4, time.Millisecond)
	if store.puts != puts {
		t.Fatalf("c wrote %d times behind the holder b registered behind", store.puts-puts)
	}
	if rec, _, err := store.Get(context.Background(), "job"+WakeSuffix); err != nil || rec.Holder != "b" {
		t.Fatalf("wake record %+v, %v; want b's", rec, err)
	}
}

// TestWakeUpsAreRateLimited: a waiter takes WakeBurst wake-ups at once,
// then one every WakeEvery; each only reads.
func TestWakeUpsAreRateLimited(t *testing.T) {
	store := memlease.New()
	if _, err := store.Put(context.Background(), "job", lease.Record{Holder: "z", Token: 1, Duration: lease.MaxDuration, Nonce: "z"}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	b := newWaker(t, store, "b", "b:1", false)
	b.next(false)
	b.next(true) // b reads the wake record
	b.next(true) // and registers
	taken := 0
	for range 10 {
		if b.lk.Wake() {
			taken++
			b.next(false)
		}
	}
	if taken != WakeBurst {
		t.Fatalf("%d wake-ups taken at once, want %d", taken, WakeBurst)
	}
	b.now = b.now.Add(WakeEvery)
	if !b.lk.Wake() {
		t.Fatal("no wake-up taken a WakeEvery later")
	}
	for _, c := range b.calls {
		if c.op.Kind == election.OpPut {
			t.Fatalf("a wake-up made b write %v", c)
		}
	}
}

// TestHeadLeavingWakesTheNextHead: a fair head that takes the lock leaves
// the queue, then wakes the waiter now at the head (its address read from
// its slot); that one, woken, learns its turn, and names itself in the
// wake record.
func TestHeadLeavingWakesTheNextHead(t *testing.T) {
	store := memlease.New()
	if _, err := store.Put(context.Background(), "job", lease.Record{Holder: "z", Token: 1, Duration: 10 * time.Second, Nonce: "z"}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	a := newWaker(t, store, "a", "a:1", true)
	a.join()
	b := newWaker(t, store, "b", "b:1", true)
	b.join()
	for len(b.calls) > 0 {
		b.next(b.calls[0].rec != RecLock)
	}
	// z gives the lock back; a, the head, reads and takes it.
	rec, ver, _ := store.Get(context.Background(), "job")
	rec.Released, rec.Nonce = true, "z2"
	if _, err := store.Put(context.Background(), "job", rec, ver); err != nil {
		t.Fatal(err)
	}
	for !a.lk.Held() {
		a.steps(1, 100*time.Millisecond)
	}
	a.steps(50, 100*time.Millisecond) // a leaves the queue
	if !slices.Equal(a.wakes, []string{"b:1"}) {
		t.Fatalf("a, leaving from the head, woke %v; want [b:1]", a.wakes)
	}
	if !b.lk.Wake() {
		t.Fatal("b did not take the wake-up")
	}
	b.steps(20, time.Millisecond) // within 20 ms: no poll, no beat comes

	if !b.lk.Turn() {
		t.Fatal("b, woken, does not know it is the head")
	}
	w, _, err := store.Get(context.Background(), "job"+WakeSuffix)
	if err != nil || w.Holder != "b" {
		t.Fatalf("wake record %+v, %v; want b's", w, err)
	}
}
