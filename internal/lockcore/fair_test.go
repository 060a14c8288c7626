package lockcore

import (
	"context"
	"errors"
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
	wakes []string // addresses woken
}

type call struct {
	op  election.Op
	rec int
}

func (h *host) Now() time.Time                       { return h.now }
func (h *host) Call(op election.Op, rec int)         { h.calls = append(h.calls, call{op, rec}) }
func (h *host) Cancel()                              {}
func (h *host) Log(slog.Level, string, ...any)       {}
func (h *host) Granted(election.Term)                {}
func (h *host) Busy(election.Leader)                 {}
func (h *host) Refused(err error)                    { h.t.Errorf("refused: %v", err) }
func (h *host) Publish(driver.Snapshot)              {}
func (h *host) Ended(election.Term, election.Reason) {}
func (h *host) Reschedule()                          {}
func (h *host) Retired()                             {}
func (h *host) WakeNext(addr string)                 { h.wakes = append(h.wakes, addr) }

// next runs the first waiting call of the given kind on the store and
// hands the lock its answer.
func (h *host) next(queue bool) {
	h.t.Helper()
	i := slices.IndexFunc(h.calls, func(c call) bool { return (c.rec != RecLock) == queue })
	if i < 0 {
		h.t.Fatalf("no waiting call (queue %v)", queue)
	}
	c := h.calls[i]
	h.calls = slices.Delete(h.calls, i, i+1)
	name := RecordName(h.lk.name, c.rec)
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

// join runs h's first queue calls: it reads the index, joins, and writes
// its slot; then its lock's first read.
func (h *host) join() {
	h.t.Helper()
	h.next(true)  // read the index
	h.next(true)  // join
	h.next(true)  // the first heartbeat
	h.next(false) // read the lock
}

// TestTicketIsOursOnlyOnceConfirmed: two waiters read an empty queue and
// both write ticket 1; the second write loses the compare-and-swap. The
// loser must take ticket 2, not take the winner's entry as its own (found
// by the simulator: lock-give-up seed 19).
func TestTicketIsOursOnlyOnceConfirmed(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.next(true) // a reads: no queue; its join as ticket 1 waits
	b.next(true) // so does b's
	b.next(true) // b's join lands: ticket 1 is b's
	if got := b.lk.Ticket(); got != 1 {
		t.Fatalf("b's ticket %d, want 1", got)
	}
	a.next(true) // a's join conflicts; it joins again on b's index
	if got := a.lk.Ticket(); got != 0 {
		t.Fatalf("a's ticket %d before its join is confirmed, want 0", got)
	}
	a.next(true)
	if got := a.lk.Ticket(); got != 2 {
		t.Fatalf("a's ticket %d, want 2", got)
	}
	rec, _, err := store.Get(context.Background(), "job"+QueueSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(rec.Payload), "1/0 2/1"; got != want {
		t.Fatalf("index %q, want %q: a took b's entry or slot", got, want)
	}
}

func TestParseQueue(t *testing.T) {
	q, err := appendQueue(nil, []byte(" 1/0  18446744073709551615/63 3/7 "))
	if err != nil || len(q) != 3 || q[1] != (qentry{1<<64 - 1, 63}) || q[2] != (qentry{3, 7}) {
		t.Fatalf("appendQueue = %v, %v", q, err)
	}
	if got := string(formatQueue(q)); got != "1/0 18446744073709551615/63 3/7" {
		t.Fatalf("formatQueue = %q", got)
	}
	for _, bad := range []string{"1", "1/", "/1", "1/2/3", "a/1", "0/1", "1/64", "1/-2", "1.0", "1/0,2/0"} {
		if _, err := appendQueue(nil, []byte(bad)); err == nil {
			t.Errorf("appendQueue(%q) accepted", bad)
		}
	}
}

// timeOut answers h's queue call in flight, if any, with a timeout.
func (h *host) timeOut() {
	if i := slices.IndexFunc(h.calls, func(c call) bool { return c.rec != RecLock }); i >= 0 {
		h.calls = slices.Delete(h.calls, i, i+1)
		h.lk.QueueResult(election.Result{Err: election.ErrTimeout}, true)
	}
}

// openHead returns a fair lock at the head of an empty queue, its gate
// opened by its first confirmed heartbeat, sent at sent; the gate must
// shut by shut, the lead window after that.
func openHead(t *testing.T) (a *host, sent, shut time.Time) {
	t.Helper()
	a = newFair(t, memlease.New(), "a")
	a.next(true) // the read: no queue
	a.next(true) // ticket 1 lands
	if a.lk.fair.open {
		t.Fatal("the gate opened before the first heartbeat was confirmed")
	}
	sent = a.now
	a.next(true) // the first heartbeat
	if !a.lk.fair.open {
		t.Fatal("the gate is closed with ticket 1 at the head")
	}
	cfg := a.lk.Config()
	return a, sent, sent.Add(election.LeadWindow(cfg.LeaseDuration, cfg.MaxDrift, cfg.Margin))
}

// TestGateClosesBeforeOthersCanDropUs: the head of the queue whose
// heartbeats stop being confirmed (cut off from the store) closes its gate
// by the lead window after its last confirmed beat was sent: from then on
// the waiter behind may have dropped its entry as abandoned, and it must
// not take the lock ahead of it when it reconnects (found by the
// simulator: lock-partition seed 683).
func TestGateClosesBeforeOthersCanDropUs(t *testing.T) {
	a, sent, shut := openHead(t)
	cfg := a.lk.Config()
	if due := a.lk.Due(); due.After(shut) {
		t.Fatalf("next wake-up at %v, after the gate's deadline %v", due, shut)
	}
	// Every heartbeat from now on times out.
	for a.now = a.now.Add(cfg.RenewInterval); a.now.Before(shut); a.now = a.now.Add(cfg.RetryMax) {
		a.lk.Fire(a.now)
		a.timeOut()
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

// advance runs h's timers up to to, answering every call at once.
func (h *host) advance(to time.Time) {
	h.t.Helper()
	for {
		for len(h.calls) > 0 {
			h.next(h.calls[0].rec != RecLock)
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

// counting counts a store's reads and writes, and the writes refused.
type counting struct {
	lease.Store
	gets, puts, conflicts int
}

func (c *counting) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	c.gets++
	return c.Store.Get(ctx, name)
}

func (c *counting) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	c.puts++
	v, err := c.Store.Put(ctx, name, rec, expect)
	if errors.Is(err, lease.ErrConflict) {
		c.conflicts++
	}
	return v, err
}

// TestPlacesSetTheCadence: the head and the waiter behind it declare the
// lock's lease in their slots, and the one behind the head reads its
// predecessor's slot every poll; farther back, a waiter declares FarLeases
// leases, beats that much less often, and reads every FarWatch polls.
// Once queued, nobody's heartbeat is refused: each writes its own slot.
func TestPlacesSetTheCadence(t *testing.T) {
	store := &counting{Store: memlease.New()}
	// A holder that keeps the lock for the whole test.
	if _, err := store.Put(context.Background(), "job", lease.Record{Holder: "z", Token: 1, Duration: lease.MaxDuration, Nonce: "z"}, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	var hs []*host
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		h := newFair(t, store, id)
		h.join()
		hs = append(hs, h)
	}
	cfg := hs[0].lk.Config()
	for i, h := range hs {
		if got := h.lk.Ticket(); got != uint64(i+1) {
			t.Fatalf("%d: ticket %d, want %d", i, got, i+1)
		}
	}
	store.puts, store.conflicts = 0, 0
	for end := hs[0].now.Add(10 * time.Minute); hs[0].now.Before(end); {
		to := hs[0].now.Add(100 * time.Millisecond)
		for _, h := range hs {
			h.advance(to)
		}
	}
	if store.conflicts != 0 {
		t.Errorf("%d of %d writes refused in ten quiet minutes", store.conflicts, store.puts)
	}
	for i, h := range hs {
		f := h.lk.fair
		rec, _, err := store.Get(context.Background(), RecordName("job", f.slot))
		if err != nil {
			t.Fatal(err)
		}
		want := cfg.LeaseDuration
		if i > Near {
			want = FarLeases * cfg.LeaseDuration
		}
		if rec.Duration != want || f.pos != i {
			t.Errorf("waiter %d: at %d, its slot declares %v; want %d and %v", i, f.pos, rec.Duration, i, want)
		}
		if i == 0 {
			continue
		}
		every := cfg.PollInterval
		if i > Near {
			every = FarWatch * cfg.PollInterval
		}
		if got := h.lk.watchEvery(f.pos); got != every {
			t.Errorf("waiter %d watches every %v, want %v", i, got, every)
		}
	}
	if slow, fast := hs[4].lk.beatEvery(FarLeases*cfg.LeaseDuration), hs[0].lk.beatEvery(cfg.LeaseDuration); slow < 4*fast {
		t.Errorf("a far waiter beats every %v, the head every %v", slow, fast)
	}
}

// TestAbandonedAfterLeaseTimesOnePlusRho: a waiter drops the entry ahead
// of it that went silent only once it has seen its slot unchanged for the
// lease × (1+ρ) on its own clock, not a moment before (ρ left out, or the
// lead window instead, would drop it early), and then takes its turn.
func TestAbandonedAfterLeaseTimesOnePlusRho(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.next(true) // a reads the index
	a.next(true) // a's ticket 1 lands
	a.next(true) // and its heartbeat; a then goes silent for good
	b.next(true) // b reads: a's entry
	b.next(true) // b's ticket 2 lands
	b.next(true) // b's heartbeat
	b.next(false)
	b.next(true) // b reads a's slot: the first sight of it
	seen := b.now
	cfg := b.lk.Config()
	wait := election.WaitBeforeTakeover(cfg.LeaseDuration, cfg.MaxDrift)
	b.advance(seen.Add(wait - time.Millisecond))
	if b.lk.Held() || b.lk.fair == nil || b.lk.fair.open {
		t.Fatalf("b's turn came %v after it first saw a's silent slot, before the lease × (1+ρ) = %v", b.now.Sub(seen), wait)
	}
	b.advance(seen.Add(wait + cfg.PollInterval))
	if !b.lk.Held() {
		t.Fatalf("b does not hold the lock %v after it first saw a's silent slot", b.now.Sub(seen))
	}
	rec, _, _ := store.Get(context.Background(), RecordName("job", 0))
	if !rec.Released || rec.Token != 1 || rec.Holder != queueHolder {
		t.Fatalf("a's slot %+v: want it given back for ticket 1", rec)
	}
}

// TestBeatBeatsTheTombstone: the waiter behind gives a silent slot back by
// compare-and-swap on the version it saw, so a heartbeat that lands first
// keeps the entry: the tombstone is refused and the wait starts again.
func TestBeatBeatsTheTombstone(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.next(true)
	a.next(true)
	a.next(true) // a: ticket 1, slot 0, beaten once
	b.join()
	b.next(true) // b first sees a's slot
	tomb := func() bool { return len(b.lk.fair.watch) > 0 && b.lk.fair.watch[0].tomb }
	for b.now.Before(b.lk.fair.watch[0].dropAt) {
		b.now = b.lk.Due()
		b.lk.Fire(b.now)
		for len(b.calls) > 0 && !tomb() {
			b.next(b.calls[0].rec != RecLock)
		}
	}
	if !tomb() {
		b.lk.Fire(b.now)
	}
	// b's tombstone is on its way; a's late heartbeat lands first.
	a.now = b.now
	a.lk.Fire(a.lk.fair.beatDue)
	a.next(true)
	b.lk.Fire(b.now)
	b.next(true) // the tombstone: refused
	if w := b.lk.fair.watch; len(w) != 1 || w[0].e.ticket != 1 || w[0].tomb || w[0].gone {
		t.Fatalf("b dropped a although a's heartbeat landed first: %+v", b.lk.fair)
	}
	if got := a.lk.Ticket(); got != 1 {
		t.Fatalf("a's ticket %d, want 1", got)
	}
}

// TestGateShutsFromSend: the lead window that keeps a head's gate open
// runs from when its last confirmed heartbeat was sent, not from when the
// answer came.
func TestGateShutsFromSend(t *testing.T) {
	a := newFair(t, memlease.New(), "a")
	a.next(true) // the read: no queue
	a.next(true) // ticket 1; its first heartbeat is sent now
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
		a.timeOut()
	}
	a.now = shut
	a.lk.Fire(a.now)
	if a.lk.fair.open {
		t.Fatalf("the gate is still open a lead window after the last confirmed heartbeat was sent (it counts from the answer, %v later)", 700*time.Millisecond)
	}
}

// TestDroppedWaiterTakesNewTicket: a waiter whose entry was dropped as
// abandoned (its heartbeats were not getting through: the waiter behind
// gave its slot back for it) takes a new ticket, at the back, at its next
// heartbeat, rather than beat a slot that is no longer its.
func TestDroppedWaiterTakesNewTicket(t *testing.T) {
	store := memlease.New()
	a, b := newFair(t, store, "a"), newFair(t, store, "b")
	a.join() // ticket 1
	b.join() // ticket 2
	ctx := context.Background()
	// Another dropped b: its slot given back for it, its entry gone.
	slot := RecordName("job", b.lk.fair.slot)
	rec, ver, err := store.Get(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, slot, lease.Record{Holder: queueHolder, Token: rec.Token, Duration: rec.Duration, Released: true, Nonce: "x"}, ver); err != nil {
		t.Fatal(err)
	}
	idx, iver, _ := store.Get(ctx, "job"+QueueSuffix)
	idx.Payload, idx.Nonce = []byte("1/0"), "dropped"
	if _, err := store.Put(ctx, "job"+QueueSuffix, idx, iver); err != nil {
		t.Fatal(err)
	}
	b.advance(b.lk.fair.beatDue)
	if got := b.lk.Ticket(); got <= 2 {
		t.Fatalf("b's ticket %d after its entry was dropped, want a new one after 2", got)
	}
	idx, _, _ = store.Get(ctx, "job"+QueueSuffix)
	if q, _ := appendQueue(nil, idx.Payload); len(q) != 2 || q[0].ticket != 1 || q[1].ticket != b.lk.Ticket() {
		t.Fatalf("index %q: want a's entry, then b's new one", idx.Payload)
	}
}

// TestSlotOlderThanTheIndex: a slot record left from before the index was
// made anew (tenure gc removed it, or an operator did) may hold a later
// ticket than the new index gives out. A waiter that meets one checks the
// index, finds its entry there, and writes its slot over it, rather than
// take itself for dropped and queue again and again.
func TestSlotOlderThanTheIndex(t *testing.T) {
	store := memlease.New()
	for name, rec := range map[string]lease.Record{
		RecordName("job", 0): {Holder: "old", Token: 57, Duration: time.Second, Nonce: "old"},
		"job":                {Holder: "z", Token: 1, Duration: lease.MaxDuration, Nonce: "z"}, // held throughout
	} {
		if _, err := store.Put(context.Background(), name, rec, lease.NoVersion); err != nil {
			t.Fatal(err)
		}
	}
	a := newFair(t, store, "a")
	a.advance(a.now.Add(time.Second))
	if got := a.lk.Ticket(); got != 1 {
		t.Fatalf("a's ticket %d, want 1", got)
	}
	rec, _, err := store.Get(context.Background(), RecordName("job", 0))
	if err != nil || rec.Holder != "a" || rec.Token != 1 {
		t.Fatalf("slot 0: %+v, %v; want a's, ticket 1", rec, err)
	}
}

// TestWaiterRequestsPerHourCountsTheCadences: the plan's figure is what
// waiters queued behind a holder make, counted at the store over an hour
// of the lock's own clock.
func TestWaiterRequestsPerHourCountsTheCadences(t *testing.T) {
	for _, n := range []int{2, 5} {
		store := &counting{Store: memlease.New()}
		if _, err := store.Put(context.Background(), "job", lease.Record{Holder: "z", Token: 1, Duration: lease.MaxDuration, Nonce: "z"}, lease.NoVersion); err != nil {
			t.Fatal(err)
		}
		var hs []*host
		for i := range n {
			h := newFair(t, store, string(rune('a'+i)))
			h.join()
			hs = append(hs, h)
		}
		step := func(d time.Duration) {
			for end := hs[0].now.Add(d); hs[0].now.Before(end); {
				to := hs[0].now.Add(50 * time.Millisecond)
				for _, h := range hs {
					h.advance(to)
				}
			}
		}
		step(time.Minute) // settled
		before := store.gets + store.puts
		step(time.Hour)
		got := float64(store.gets+store.puts-before) / float64(n)
		reads, writes := WaiterRequestsPerHour(hs[0].lk.Config().Timing, n)
		want := reads + writes
		if got < want*0.97 || got > want*1.03 {
			t.Errorf("%d waiters: %.0f requests per waiter in an hour, the plan says %.0f", n, got, want)
		}
	}
}

// The gate shuts by the clock alone: with the next heartbeat in flight and
// never answered (the store hangs), the open gate of the queue's head is
// shut when its timer fires at the lead window's end, with no answer or
// other step to look at it.
func TestGateShutsAtItsTimeWithoutAnAnswer(t *testing.T) {
	a, sent, shut := openHead(t)
	for i := 0; i < 1000 && a.lk.fair.open; i++ { // its timers only; calls pile up unanswered
		d := a.lk.Due()
		if d.IsZero() || d.After(shut) {
			t.Fatalf("the open gate's next wake-up is %v, after its shut time %v", d, shut)
		}
		a.now = d
		a.lk.Fire(d)
	}
	if a.lk.fair.open || a.now.After(shut) {
		t.Fatalf("the gate is open at %v (shut time %v)", a.now.Sub(sent), shut.Sub(sent))
	}
}
