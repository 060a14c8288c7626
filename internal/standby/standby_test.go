package standby

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// A flood of wake-ups makes WakeBurst reads at once, then one every
// WakeEvery, however many arrive.
func TestWakeRateLimit(t *testing.T) {
	var s Standby
	t0 := time.Unix(1e9, 0)
	allowed := 0
	for i := range 1000 { // 1,000 wake-ups a second for 10s
		if s.AllowWake(t0.Add(time.Duration(i) * 10 * time.Millisecond)) {
			allowed++
		}
	}
	if want := WakeBurst + 9; allowed != want { // the burst, then one a second
		t.Fatalf("%d wake-ups allowed in 10s of a flood, want %d", allowed, want)
	}
	// Quiet for a while: the full burst again.
	later := t0.Add(time.Minute)
	for i := range WakeBurst {
		if !s.AllowWake(later) {
			t.Fatalf("wake-up %d of a new burst refused", i)
		}
	}
	if s.AllowWake(later) {
		t.Fatal("a wake-up beyond the burst allowed")
	}
}

// host runs a Standby's store calls when the test says, on a memlease.
type host struct {
	t     *testing.T
	s     *Standby
	now   time.Time
	store *memlease.Store
	calls []election.Op
	hot   []bool // every Hot call, in order
	hand  []int  // every HandOver call's priority, in order
}

func (h *host) Now() time.Time                            { return h.now }
func (h *host) Call(op election.Op)                       { h.calls = append(h.calls, op) }
func (h *host) Cancel()                                   {}
func (h *host) Log(_ slog.Level, msg string, args ...any) { h.t.Log(append([]any{msg}, args...)...) }
func (h *host) Hot(hot bool)                              { h.hot = append(h.hot, hot) }
func (h *host) Reschedule()                               {}
func (h *host) HandOver(_ string, p int)                  { h.hand = append(h.hand, p) }

// next answers the first waiting call, running timers until one waits.
func (h *host) next() {
	h.t.Helper()
	for i := 0; len(h.calls) == 0; i++ {
		if d := h.s.Due(); i > 100 || d.IsZero() {
			h.t.Fatal("no call waits, and none is due")
		}
		if d := h.s.Due(); d.After(h.now) {
			h.now = d
		}
		h.s.Fire(h.now)
	}
	op := h.calls[0]
	h.calls = h.calls[1:]
	res := election.Result{ID: op.ID, Record: op.Record}
	if op.Kind == election.OpGet {
		res.Record, res.Version, res.Err = h.store.Get(context.Background(), h.s.name)
	} else {
		res.Version, res.Err = h.store.Put(context.Background(), h.s.name, op.Record, op.Expect)
	}
	h.s.Result(res)
}

// TestLostStandbyTurnsColdAndCampaignsLater: a standby whose record
// another candidate took reads cold from the moment its term on the record
// ends, not once its campaign has wound down; and it campaigns again a
// poll later, not at once.
func TestLostStandbyTurnsColdAndCampaignsLater(t *testing.T) {
	cfg := election.Config{ID: "a", Timing: election.StandbyTiming(election.Timing{}.WithDefaults()).WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", cfg, "", Preference{})
	h.s.Follow(true)
	h.next() // read: no record
	h.next() // the write lands: a is the standby
	if !h.s.Hot() {
		t.Fatalf("not the standby after taking the record; Hot calls %v", h.hot)
	}
	// Another candidate takes the record (as after a long pause of ours).
	rec, ver, err := h.store.Get(context.Background(), "job::standby")
	if err != nil {
		t.Fatal(err)
	}
	rec.Holder, rec.Nonce = "b", "b1"
	if _, err := h.store.Put(context.Background(), "job::standby", rec, ver); err != nil {
		t.Fatal(err)
	}
	h.next() // a's next renewal conflicts: its term on the record ends
	if h.s.Hot() || len(h.hot) < 2 || h.hot[len(h.hot)-1] {
		t.Fatalf("still reading hot once its term on the record ended; Hot calls %v", h.hot)
	}
	for len(h.calls) > 0 { // the campaign winds down
		h.next()
	}
	if due := h.s.Due(); due.Sub(h.now) < cfg.PollInterval {
		t.Fatalf("the campaign restarts %v after it was lost, want a poll (%v) later", due.Sub(h.now), cfg.PollInterval)
	}
}

// TestCutOffStandbyTurnsColdAtItsDeadline: a standby cut off from the
// store reads cold from its term's deadline on, while its campaign still
// winds down (the release waits on the store).
func TestCutOffStandbyTurnsColdAtItsDeadline(t *testing.T) {
	cfg := election.Config{ID: "a", Timing: election.StandbyTiming(election.Timing{}.WithDefaults()).WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", cfg, "", Preference{})
	h.s.Follow(true)
	h.next()
	h.next()
	if !h.s.Hot() {
		t.Fatal("not the standby after taking the record")
	}
	end := h.now.Add(cfg.LeaseDuration) // past the term's deadline
	for h.now.Before(end) {             // no call is answered from now on
		h.calls = nil
		d := h.s.Due()
		if d.IsZero() || d.After(end) {
			break
		}
		h.now = d
		h.s.Fire(h.now)
	}
	h.now = end
	h.s.Fire(h.now)
	if h.s.Hot() {
		t.Fatalf("still reading hot %v after taking the record, cut off from the store since; Hot calls %v", cfg.LeaseDuration, h.hot)
	}
	if h.s.Done() || h.s.lk == nil {
		t.Fatal("the campaign is over already: this test needs it winding down")
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, c := range []struct {
		addr string
		prio int
		want string
	}{
		{"", 0, ""},
		{"10.0.0.5:7946", 0, "10.0.0.5:7946"}, // as written before priorities
		{"10.0.0.5:7946", 3, "10.0.0.5:7946 priority=3"},
		{"", -2, "priority=-2"},
	} {
		p := Payload(c.addr, c.prio)
		if string(p) != c.want {
			t.Errorf("Payload(%q, %d) = %q, want %q", c.addr, c.prio, p, c.want)
		}
		if addr, prio := Parse(p); addr != c.addr || prio != c.prio {
			t.Errorf("Parse(%q) = %q, %d", p, addr, prio)
		}
	}
}

// standbyConfig is a standby record's Machine configuration for id.
func standbyConfig(id string) election.Config {
	return election.Config{ID: id, Timing: election.StandbyTiming(election.Timing{}.WithStandby()).WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
}

// put writes the standby record of "job" as holder with priority prio,
// over whatever it holds.
func put(t *testing.T, st *memlease.Store, holder string, prio int, nonce string) {
	t.Helper()
	rec, ver, err := st.Get(context.Background(), "job::standby")
	if err != nil {
		ver = ""
	}
	rec = lease.Record{Holder: holder, Token: rec.Token + 1, Duration: time.Minute, Nonce: nonce, Payload: Payload("", prio)}
	if _, err := st.Put(context.Background(), "job::standby", rec, ver); err != nil {
		t.Fatal(err)
	}
}

// A follower of higher priority takes the standby record from its holder
// at its first read; one of equal priority waits.
func TestHigherPriorityTakesTheRecord(t *testing.T) {
	for _, c := range []struct {
		prio int
		take bool
	}{{5, true}, {2, false}, {1, false}} {
		h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
		put(t, h.store, "b", 2, "b1")
		h.s = New(h, "job", standbyConfig("a"), "", Preference{Priority: c.prio})
		h.s.Follow(true)
		h.next() // read: b holds it
		if took := len(h.calls) == 1 && h.calls[0].Kind == election.OpPut; took != c.take {
			t.Fatalf("priority %d over a standby of 2: took the record %v, want %v", c.prio, took, c.take)
		}
		if c.take {
			h.next()
			if !h.s.Hot() {
				t.Fatalf("priority %d: not the standby after taking the record", c.prio)
			}
		}
	}
}

// A leader hands over to a standby of higher priority once it has seen
// the standby's record rewritten (alive) and its term is the hold-off old;
// once a term; never to one of equal priority.
func TestLeaderHandsOver(t *testing.T) {
	const holdOff = time.Minute
	for _, c := range []struct {
		prio int
		want int // HandOver calls
	}{{5, 1}, {3, 0}} {
		h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
		cfg := standbyConfig("a")
		h.s = New(h, "job", cfg, "", Preference{Priority: 3, HoldOff: holdOff})
		put(t, h.store, "b", c.prio, "b1")
		start := h.now
		h.s.Lead(true)
		h.next() // the first read proves nothing
		if len(h.hand) != 0 {
			t.Fatalf("handed over at the first read")
		}
		for i := range 6 { // the standby renews before each read
			put(t, h.store, "b", c.prio, fmt.Sprint("b", i+2))
			h.next()
			if len(h.hand) > 0 && h.now.Sub(start) < holdOff {
				t.Fatalf("handed over %v into the term, before the hold-off", h.now.Sub(start))
			}
		}
		if len(h.hand) != c.want {
			t.Fatalf("standby of priority %d, leader of 3: %d hand-overs, want %d", c.prio, len(h.hand), c.want)
		}
	}
	// A standby that stopped renewing (dead) is not handed to.
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", standbyConfig("a"), "", Preference{Priority: 0, HoldOff: 0})
	put(t, h.store, "b", 9, "b1")
	h.s.Lead(true)
	for range 4 {
		h.next()
	}
	if len(h.hand) != 0 {
		t.Fatalf("handed over to a standby whose record never changed")
	}
}

// A standby record given back (released) is no live standby: a leader
// hands over to no one, however high the priority it names.
func TestLeaderIgnoresAReleasedStandby(t *testing.T) {
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", standbyConfig("a"), "", Preference{Priority: 0, HoldOff: 0})
	put(t, h.store, "b", 9, "b1")
	h.s.Lead(true)
	h.next()           // the first read proves nothing
	for i := range 3 { // written since each read, but released
		rec, ver, err := h.store.Get(context.Background(), "job::standby")
		if err != nil {
			t.Fatal(err)
		}
		rec.Released, rec.Nonce = true, fmt.Sprint("r", i)
		if _, err := h.store.Put(context.Background(), "job::standby", rec, ver); err != nil {
			t.Fatal(err)
		}
		h.next()
	}
	if len(h.hand) != 0 {
		t.Fatalf("handed over %v times to a standby record that was released", len(h.hand))
	}
}

// A campaign for the record that ended on store errors starts again a
// poll later, not at once: no hot loop against a failing store.
func TestStandbyAfterStoreErrorsCampaignsAPollLater(t *testing.T) {
	cfg := election.Config{ID: "a", Timing: election.StandbyTiming(election.Timing{}.WithDefaults()).WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", cfg, "", Preference{})
	h.s.Follow(true)
	failing := fmt.Errorf("%w: no rights", lease.ErrPermanent)
	for range 50 { // every call fails, for good: the campaign is refused and retires
		for i := 0; len(h.calls) == 0 && h.s.lk != nil; i++ {
			if d := h.s.Due(); i > 100 || d.IsZero() {
				break
			}
			h.now = maxTime(h.now, h.s.Due())
			h.s.Fire(h.now)
		}
		if len(h.calls) == 0 {
			break
		}
		op := h.calls[0]
		h.calls = h.calls[1:]
		h.s.Result(election.Result{ID: op.ID, Err: failing})
	}
	if h.s.lk != nil {
		t.Fatal("the campaign never ended on a store that refuses for good")
	}
	if due := h.s.Due(); due.Sub(h.now) < cfg.PollInterval {
		t.Fatalf("after the store refused, the campaign restarts %v later; want a poll (%v) at least", due.Sub(h.now), cfg.PollInterval)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// A leader that finds no standby at its election reads the record again
// at its first renewal, not a cold poll later, and sends the notice that
// renewal went without as soon as the read finds where the standby
// listens; later renewals name it at once. Past the term's first cold
// poll, a renewal reads nothing more.
func TestLeaderLearnsTheStandbyAtItsFirstRenewal(t *testing.T) {
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", standbyConfig("a"), "10.0.0.1:7946", Preference{})
	start := h.now
	h.s.Lead(true)
	h.next() // at election: no standby yet
	if len(h.calls) != 0 || !h.s.Due().Equal(start.Add(h.s.cfg.PollInterval)) {
		t.Fatalf("after a read that found none: calls %v, next read at %v", h.calls, h.s.Due())
	}
	rec := lease.Record{Holder: "b", Token: 1, Duration: time.Minute, Nonce: "b1", Payload: Payload("10.0.0.2:7946", 0)}
	if _, err := h.store.Put(context.Background(), "job::standby", rec, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(2 * time.Second) // the first renewal
	if addr := h.s.Renewed(true, h.now.Add(9*time.Second)); addr != "" {
		t.Fatalf("first renewal: notice to %q before any read found it", addr)
	}
	if owed := h.s.Owed(); owed != "" {
		t.Fatalf("owed %q before the read", owed)
	}
	if !h.s.Due().Equal(h.now) {
		t.Fatalf("first renewal: the record's next read at %v, want now (%v)", h.s.Due(), h.now)
	}
	h.next()
	if owed := h.s.Owed(); owed != "10.0.0.2:7946" {
		t.Fatalf("after the read: owed notice to %q, want the standby's address", owed)
	}
	if owed := h.s.Owed(); owed != "" {
		t.Fatalf("owed twice: %q", owed)
	}
	h.now = h.now.Add(2 * time.Second)
	if addr := h.s.Renewed(true, h.now.Add(9*time.Second)); addr != "10.0.0.2:7946" {
		t.Fatalf("second renewal: notice to %q", addr)
	}
	// A term past its first cold poll reads at the cold cadence only.
	h2 := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h2.s = New(h2, "job", standbyConfig("a"), "10.0.0.1:7946", Preference{})
	h2.s.Lead(true)
	h2.next()
	next := h2.s.Due()
	h2.now = next.Add(-time.Second)
	h2.s.Renewed(true, h2.now.Add(9*time.Second))
	h2.now = next.Add(time.Second)
	h2.next()
	h2.now = h2.now.Add(2 * time.Second)
	h2.s.Renewed(true, h2.now.Add(9*time.Second))
	if d := h2.s.Due(); !d.After(h2.now) {
		t.Fatalf("a renewal a cold poll into the term reads the record at once (due %v, now %v)", d, h2.now)
	}
}

// A standby whose campaign ended on store errors that retrying could cure
// (its term on the record ran out for want of renewals, its release went
// unconfirmed) campaigns again a poll later too, not at once: the store
// is failing, and a follower that is not sure it is free reads it cold.
func TestStandbyLostToStoreErrorsCampaignsAPollLater(t *testing.T) {
	cfg := election.Config{ID: "a", Timing: election.StandbyTiming(election.Timing{}.WithDefaults()).WithDefaults(), Rand: rand.New(rand.NewPCG(1, 2))}
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = New(h, "job", cfg, "", Preference{})
	h.s.Follow(true)
	h.next() // read: no record
	h.next() // the write lands: a is the standby
	if !h.s.Hot() {
		t.Fatalf("not the standby after taking the record; Hot calls %v", h.hot)
	}
	failing := errors.New("connection reset by peer")
	for range 1000 { // every call fails until the campaign is over
		for i := 0; len(h.calls) == 0 && h.s.lk != nil; i++ {
			if d := h.s.Due(); i > 100 || d.IsZero() {
				break
			}
			h.now = maxTime(h.now, h.s.Due())
			h.s.Fire(h.now)
		}
		if len(h.calls) == 0 {
			break
		}
		op := h.calls[0]
		h.calls = h.calls[1:]
		h.s.Result(election.Result{ID: op.ID, Err: failing})
	}
	if h.s.lk != nil || h.s.Hot() {
		t.Fatalf("the campaign still runs (hot %v) after its term on the record ran out", h.s.Hot())
	}
	if due := h.s.Due(); due.Sub(h.now) < cfg.PollInterval {
		t.Fatalf("after store errors ended the campaign, it restarts %v later; want a poll (%v) at least", due.Sub(h.now), cfg.PollInterval)
	}
}

// TestFedLeaderReadsOnTheFeedOnly: where the store's feed tells of the
// standby record's writes, a leader reads the record as its term begins
// and then only when told of a write, never on a timer; a preferred
// standby that writes the record is still handed the lease; a feed that
// stops has the leader read at once and poll again.
func TestFedLeaderReadsOnTheFeedOnly(t *testing.T) {
	h := &host{t: t, now: time.Unix(1e9, 0), store: memlease.New()}
	h.s = NewWatch(h, "job", standbyConfig("a"), Preference{Priority: 3})
	h.s.Fed(true)
	h.s.Lead(true)
	h.next() // at once: nothing there
	if d := h.s.Due(); !d.IsZero() {
		t.Fatalf("a read due at %v with nothing told: want none", d.Sub(h.now))
	}
	for i := range 2 { // a preferred standby writes the record, twice: read each time
		put(t, h.store, "b", 5, fmt.Sprint("b", i))
		h.now = h.now.Add(time.Hour)
		h.s.Told()
		h.next()
	}
	if len(h.hand) != 1 {
		t.Fatalf("%d hand-overs to the preferred standby the feed told of, want 1", len(h.hand))
	}
	h.s.Fed(false)
	if d := h.s.Due(); !d.Equal(h.now) {
		t.Fatalf("the feed stopped: next read at %v, want at once", d.Sub(h.now))
	}
	h.next()
	if d := h.s.Due(); !d.Equal(h.now.Add(standbyConfig("a").PollInterval)) {
		t.Fatalf("polling again: next read %v later, want a cold poll", d.Sub(h.now))
	}
}
