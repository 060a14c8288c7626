package lockcore

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// host is a Host whose store calls wait until the test runs them, in the
// order it chooses.
type host struct {
	t     *testing.T
	lk    *Lock
	now   time.Time
	store lease.Store
	calls []call
}

type call struct {
	op    election.Op
	queue bool
}

func (h *host) Now() time.Time                       { return h.now }
func (h *host) Call(op election.Op, queue bool)      { h.calls = append(h.calls, call{op, queue}) }
func (h *host) Cancel()                              {}
func (h *host) Log(slog.Level, string, ...any)       {}
func (h *host) Granted(election.Term)                {}
func (h *host) Busy(election.Leader)                 {}
func (h *host) Refused(err error)                    { h.t.Errorf("refused: %v", err) }
func (h *host) Publish(driver.Snapshot)              {}
func (h *host) Ended(election.Term, election.Reason) {}
func (h *host) Reschedule()                          {}
func (h *host) Retired()                             {}

// next runs the first waiting call of the given kind on the store and
// hands the lock its answer.
func (h *host) next(queue bool) {
	h.t.Helper()
	i := slices.IndexFunc(h.calls, func(c call) bool { return c.queue == queue })
	if i < 0 {
		h.t.Fatalf("no waiting call (queue %v)", queue)
	}
	c := h.calls[i]
	h.calls = slices.Delete(h.calls, i, i+1)
	name := h.lk.name
	if queue {
		name += QueueSuffix
	}
	res := election.Result{ID: c.op.ID, Record: c.op.Record}
	ctx := context.Background()
	if c.op.Kind == election.OpGet {
		res.Record, res.Version, res.Err = h.store.Get(ctx, name)
	} else {
		res.Version, res.Err = h.store.Put(ctx, name, c.op.Record, c.op.Expect)
	}
	if queue {
		h.lk.QueueResult(res, c.op.Kind == election.OpPut)
		h.lk.Fire(h.now)
	} else {
		h.lk.Result(res)
	}
}

func newFair(t *testing.T, store lease.Store, id string) *host {
	h := &host{t: t, now: time.Unix(1e9, 0), store: store}
	cfg := election.Config{ID: id, Timing: election.Timing{}.WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h.lk = new(Lock)
	if err := h.lk.Init(h, "job", &cfg, false, true); err != nil {
		t.Fatal(err)
	}
	h.lk.Start()
	h.lk.Fire(h.now) // the first queue step: read the queue
	return h
}

// TestTicketIsOursOnlyOnceConfirmed: two waiters read an empty queue and
// both write ticket 1; the second write loses the compare-and-swap. The
// loser must take ticket 2, not beat the winner's entry as its own (found
// by the simulator: lock-give-up seed 19).
func TestTicketIsOursOnlyOnceConfirmed(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.next(true) // a reads: no queue; its write of ticket 1 waits
	b.next(true) // so does b's
	b.next(true) // b's write lands: ticket 1 is b's
	if got := b.lk.Ticket(); got != 1 {
		t.Fatalf("b's ticket %d, want 1", got)
	}
	a.next(true) // a's write conflicts; it writes again on b's record
	if got := a.lk.Ticket(); got != 0 {
		t.Fatalf("a's ticket %d before its write is confirmed, want 0", got)
	}
	a.next(true)
	if got := a.lk.Ticket(); got != 2 {
		t.Fatalf("a's ticket %d, want 2", got)
	}
	rec, _, err := store.Get(context.Background(), "job"+QueueSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(rec.Payload), "1.0 2.0"; got != want {
		t.Fatalf("queue %q, want %q: a beat b's entry as its own", got, want)
	}
}

func TestParseQueue(t *testing.T) {
	q, err := parseQueue([]byte(" 1.0  2.18446744073709551615 3.7 "))
	if err != nil || len(q) != 3 || q[1] != (qentry{2, 1<<64 - 1}) || q[2] != (qentry{3, 7}) {
		t.Fatalf("parseQueue = %v, %v", q, err)
	}
	if got := string(formatQueue(q)); got != "1.0 2.18446744073709551615 3.7" {
		t.Fatalf("formatQueue = %q", got)
	}
	for _, bad := range []string{"1", "1.", ".1", "1.2.3", "a.1", "1.18446744073709551616", "1.-2", "1.0,2.0"} {
		if _, err := parseQueue([]byte(bad)); err == nil {
			t.Errorf("parseQueue(%q) accepted", bad)
		}
	}
}

// TestGateClosesBeforeOthersCanDropUs: the head of the queue whose
// heartbeats stop being confirmed (cut off from the store) closes its gate
// by the lead window after its last confirmed beat was sent: from then on
// others may have dropped its entry as abandoned, and it must not take the
// lock ahead of them when it reconnects (found by the simulator:
// lock-partition seed 683).
func TestGateClosesBeforeOthersCanDropUs(t *testing.T) {
	a := newFair(t, memlease.New(), "a")
	a.next(true) // the read: no queue
	a.next(true) // the write of ticket 1 lands
	if !a.lk.fair.open {
		t.Fatal("the gate is closed with ticket 1 at the head")
	}
	sent := a.now
	cfg := a.lk.Config()
	shut := sent.Add(election.LeadWindow(cfg.LeaseDuration, cfg.MaxDrift, cfg.Margin))
	if due := a.lk.Due(); due.After(shut) {
		t.Fatalf("next wake-up at %v, after the gate's deadline %v", due, shut)
	}
	// Every heartbeat from now on times out.
	for a.now = a.now.Add(cfg.RenewInterval); a.now.Before(shut); a.now = a.now.Add(cfg.RetryMax) {
		a.lk.Fire(a.now)
		if i := slices.IndexFunc(a.calls, func(c call) bool { return c.queue }); i >= 0 {
			a.calls = slices.Delete(a.calls, i, i+1)
			a.lk.QueueResult(election.Result{Err: election.ErrTimeout}, true)
		}
		if !a.lk.fair.open {
			t.Fatalf("the gate closed at %v, before its deadline %v", a.now.Sub(sent), shut.Sub(sent))
		}
	}
	a.now = shut
	a.lk.Fire(a.now)
	if a.lk.fair.open {
		t.Fatal("the gate is still open a lead window after the last confirmed heartbeat was sent")
	}
}

// TestFarWaitersBeatLessOften: the head of the queue and the two behind it
// beat every RenewInterval; a waiter further back beats as seldom as the
// renewal rule allows, and that is still well within the time others wait
// before they drop its entry.
func TestFarWaitersBeatLessOften(t *testing.T) {
	store := memlease.New()
	var hs []*host
	for _, id := range []string{"a", "b", "c", "d"} {
		h := newFair(t, store, id)
		h.next(true)  // read the queue
		h.next(true)  // write our ticket
		h.next(false) // read the lock: gated but for a's, it next reads a lease later
		hs = append(hs, h)
	}
	cfg := hs[0].lk.Config()
	for i, h := range hs {
		if got := h.lk.Ticket(); got != uint64(i+1) {
			t.Fatalf("%d: ticket %d, want %d", i, got, i+1)
		}
	}
	slow := election.LeadWindow(cfg.LeaseDuration, cfg.MaxDrift, cfg.Margin) - 2*cfg.OpTimeout - cfg.RetryMax
	if slow <= cfg.RenewInterval || slow >= election.WaitBeforeTakeover(cfg.LeaseDuration, cfg.MaxDrift)/2 {
		t.Fatalf("slow beat %v: not between RenewInterval %v and half the wait before an entry is dropped", slow, cfg.RenewInterval)
	}
	for i, want := range []time.Duration{cfg.RenewInterval, cfg.RenewInterval, cfg.RenewInterval, slow} {
		if got := hs[i].lk.Due().Sub(hs[i].now); got != want {
			t.Errorf("waiter %d of 4: next beat in %v, want %v", i+1, got, want)
		}
	}
}

// advance runs h's timers up to to, answering every call at once.
func (h *host) advance(to time.Time) {
	h.t.Helper()
	for {
		for len(h.calls) > 0 {
			h.next(h.calls[0].queue)
		}
		d := h.lk.Due()
		if d.IsZero() || d.After(to) {
			break
		}
		h.now = d
		h.lk.Fire(d)
	}
	h.now = to
}

// TestAbandonedAfterLeaseTimesOnePlusRho: a waiter drops the entry of one
// ahead of it that went silent only once it has seen its heartbeat
// unchanged for the lease × (1+ρ) on its own clock, not a moment before
// (ρ left out, or the lead window instead, would drop it early), and then
// takes its turn.
func TestAbandonedAfterLeaseTimesOnePlusRho(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.next(true) // a reads the queue
	a.next(true) // a's ticket 1 lands; a then goes silent for good
	b.next(true) // b reads: a's entry, beat 0
	seen := b.now
	b.next(true) // b's ticket 2 lands
	cfg := b.lk.Config()
	wait := election.WaitBeforeTakeover(cfg.LeaseDuration, cfg.MaxDrift)
	b.advance(seen.Add(wait - time.Millisecond))
	if b.lk.Held() || b.lk.fair == nil || b.lk.fair.open {
		t.Fatalf("b's turn came %v after it first saw a's silent entry, before the lease × (1+ρ) = %v", b.now.Sub(seen), wait)
	}
	b.advance(seen.Add(wait + cfg.RenewInterval))
	if !b.lk.Held() {
		t.Fatalf("b does not hold the lock %v after it first saw a's silent entry", b.now.Sub(seen))
	}
}

// TestGateShutsFromSend: the lead window that keeps a head's gate open
// runs from when its last confirmed heartbeat was sent, not from when the
// answer came.
func TestGateShutsFromSend(t *testing.T) {
	a := newFair(t, memlease.New(), "a")
	a.next(true) // the read: no queue; the write of ticket 1 is sent now
	sent := a.now
	a.now = a.now.Add(700 * time.Millisecond) // its answer comes late
	a.next(true)
	if !a.lk.fair.open {
		t.Fatal("the gate is closed with ticket 1 at the head")
	}
	cfg := a.lk.Config()
	shut := sent.Add(election.LeadWindow(cfg.LeaseDuration, cfg.MaxDrift, cfg.Margin))
	// Every heartbeat from now on times out.
	for d := a.lk.Due(); !d.IsZero() && d.Before(shut); d = a.lk.Due() {
		a.now = d
		a.lk.Fire(d)
		if i := slices.IndexFunc(a.calls, func(c call) bool { return c.queue }); i >= 0 {
			a.calls = slices.Delete(a.calls, i, i+1)
			a.lk.QueueResult(election.Result{Err: election.ErrTimeout}, true)
		}
	}
	a.now = shut
	a.lk.Fire(a.now)
	if a.lk.fair.open {
		t.Fatalf("the gate is still open a lead window after the last confirmed heartbeat was sent (it counts from the answer, %v later)", 700*time.Millisecond)
	}
}

// TestDroppedWaiterTakesNewTicket: a waiter whose entry others dropped as
// abandoned (its heartbeats were not getting through) takes a new ticket,
// at the back, rather than beat an entry that is gone.
func TestDroppedWaiterTakesNewTicket(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.next(true)
	a.next(true) // ticket 1
	b.next(true)
	b.next(true) // ticket 2
	// Others dropped b's entry: the queue holds a's alone.
	rec, ver, err := store.Get(context.Background(), "job"+QueueSuffix)
	if err != nil {
		t.Fatal(err)
	}
	rec.Payload, rec.Nonce = []byte("1.9"), "dropped"
	if _, err := store.Put(context.Background(), "job"+QueueSuffix, rec, ver); err != nil {
		t.Fatal(err)
	}
	b.advance(b.now.Add(b.lk.Config().RenewInterval))
	if got := b.lk.Ticket(); got <= 2 {
		t.Fatalf("b's ticket %d after its entry was dropped, want a new one after 2", got)
	}
	rec, _, _ = store.Get(context.Background(), "job"+QueueSuffix)
	if q, _ := parseQueue(rec.Payload); len(q) != 2 || q[0].ticket != 1 || q[1].ticket != b.lk.Ticket() {
		t.Fatalf("queue %q: want a's entry, then b's new one", rec.Payload)
	}
}
