package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

var expired = tenure.ReasonExpired.String()

// testWorld returns a world with two idle instances, a and b, for feeding the
// checker by hand.
func testWorld(t *testing.T) (*world, *instance, *instance) {
	t.Helper()
	w := newWorld(Lookup("steady-state"), 1, Options{}, newFastRun)
	mk := func(n *node) *instance {
		n.clk.ppb = 0 // readings advance with true time
		in := &instance{w: w, node: n, num: len(w.insts), ID: n.Name, label: n.Name, timing: n.spec.timing(), resumedAt: -1}
		w.insts = append(w.insts, in)
		return in
	}
	return w, mk(w.nodes[0]), mk(w.nodes[1])
}

func messages(w *world) string {
	var b strings.Builder
	for _, v := range w.chk.viol {
		b.WriteString(v.Inv.String() + ": " + v.Msg + "\n")
	}
	return b.String()
}

func TestCheckerSeesOverlapAndTokens(t *testing.T) {
	w, a, b := testWorld(t)
	w.chk.elected(a, 1)
	w.now = time.Second
	w.chk.elected(b, 1) // while a leads, and with a's token
	if w.chk.counts[OneLeader] != 1 || w.chk.counts[Tokens] != 1 {
		t.Fatalf("counts %v:\n%s", w.chk.counts, messages(w))
	}
	w.chk.demoted(b, 1, "x")
	w.chk.demoted(a, 1, "x")
	w.chk.elected(b, 3)
	w.chk.demoted(b, 3, "x")
	w.chk.elected(a, 2) // lower than an earlier term's
	if w.chk.counts[Tokens] != 2 || w.chk.counts[OneLeader] != 1 {
		t.Fatalf("counts %v:\n%s", w.chk.counts, messages(w))
	}
}

func TestCheckerSeesLateCancellation(t *testing.T) {
	w, a, _ := testWorld(t)
	w.chk.elected(a, 1)
	a.deadline = a.local().Add(time.Second)
	w.now += time.Second // exactly at the deadline: in time
	w.chk.demoted(a, 1, expired)
	w.chk.elected(a, 2)
	a.deadline = a.local().Add(time.Second)
	w.now += 2 * time.Second
	w.chk.demoted(a, 2, expired)
	if w.chk.counts[Callbacks] != 1 || !strings.Contains(messages(w), "after its deadline") {
		t.Fatalf("counts %v:\n%s", w.chk.counts, messages(w))
	}
	// Unless the process was paused through its deadline and acts now.
	w.chk.elected(a, 3)
	a.deadline = a.local().Add(time.Second)
	w.now += 2 * time.Second
	a.resumedAt = w.now
	w.chk.demoted(a, 3, expired)
	if w.chk.counts[Callbacks] != 1 {
		t.Fatalf("counts %v:\n%s", w.chk.counts, messages(w))
	}
}

func TestCheckerSeesCallbackOrder(t *testing.T) {
	w, a, _ := testWorld(t)
	w.chk.cbDemoted(a, 1, "x", true) // without OnElected
	w.chk.cbElected(a, 1)
	w.chk.cbDemoted(a, 1, "x", true) // before OnElected returned
	w.chk.cbElected(a, 2)
	w.chk.cbReturned(a)
	w.chk.cbDemoted(a, 2, "x", false) // context still alive
	w.chk.cbElected(a, 3)
	w.chk.cbElected(a, 4) // twice
	if got := w.chk.counts[Callbacks]; got != 4 {
		t.Fatalf("%d I4 violations, want 4:\n%s", got, messages(w))
	}
}

func TestCheckerSeesStaleWrites(t *testing.T) {
	for _, fenced := range []bool{true, false} {
		w, a, b := testWorld(t)
		w.res.fenced = fenced
		w.res.write(b, 2)
		w.res.write(a, 1)
		w.res.write(b, 2)
		if fenced {
			if w.chk.counts[Fencing] != 0 || w.chk.stats.Refused != 1 || w.chk.stats.Accepted != 2 {
				t.Fatalf("fenced: counts %v stats %+v", w.chk.counts, w.chk.stats)
			}
		} else if w.chk.counts[Fencing] != 1 || w.chk.stats.StaleAccepted != 1 {
			t.Fatalf("unfenced: counts %v stats %+v", w.chk.counts, w.chk.stats)
		}
	}
}

func TestCheckerSeesNoFailover(t *testing.T) {
	w, a, _ := testWorld(t)
	w.chk.leaderSince(0, time.Second, "crash")
	w.chk.elected(a, 1)
	w.chk.leaderSince(0, time.Second, "crash")
	if w.chk.counts[Liveness] != 1 {
		t.Fatalf("counts %v:\n%s", w.chk.counts, messages(w))
	}
}

func TestCheckerSeesWrongReason(t *testing.T) {
	w, a, b := testWorld(t)
	term := func(in *instance, tok uint64, reason string) {
		w.chk.elected(in, tok)
		in.deadline = in.local().Add(time.Second)
		w.now += 10 * time.Millisecond
		w.chk.demoted(in, tok, reason)
	}
	term(a, 1, tenure.ReasonShutDown.String())      // nothing stopped a
	term(a, 2, tenure.ReasonLost.String())          // no later token stored
	term(a, 3, tenure.ReasonRecordLost.String())    // the record is intact
	term(a, 4, expired)                             // its deadline is ahead
	term(a, 5, tenure.ReasonInvalidRecord.String()) // no corrupt records here
	if got := w.chk.counts[Callbacks]; got != 5 {
		t.Fatalf("%d I4 violations, want 5:\n%s", got, messages(w))
	}
	// The same reasons, each with its cause.
	b.stopped = true
	term(b, 6, tenure.ReasonShutDown.String())
	w.store.maxEver = 8
	term(b, 7, tenure.ReasonLost.String())
	w.chk.elected(b, 9)
	w.store.lostAt = w.now
	w.chk.demoted(b, 9, tenure.ReasonRecordLost.String())
	w.chk.elected(b, 10)
	b.deadline = b.local()
	w.chk.demoted(b, 10, expired)
	if got := w.chk.counts[Callbacks]; got != 5 {
		t.Fatalf("%d I4 violations, want still 5:\n%s", got, messages(w))
	}
}

// A release sent while the term's callbacks have not all returned breaks I4,
// as the items are staged; one sent after OnDemoted returned does not.
func TestCheckerSeesEarlyRelease(t *testing.T) {
	w, a, _ := testWorld(t)
	rec := lease.Record{Holder: "a", Token: 1, Duration: 10 * time.Second, Released: true, Nonce: "n", WrittenAt: localEpoch}
	release := func() {
		w.stage(item{in: a, kind: itRequest, req: &request{in: a, kind: election.OpPut, rec: rec, expect: "v1"}})
		w.flush()
	}
	w.stage(item{in: a, kind: itElected, tok: 1})
	w.stage(item{in: a, src: srcCallbacks, kind: itCbElected, tok: 1})
	w.stage(item{in: a, src: srcCallbacks, kind: itCbReturn})
	w.stage(item{in: a, src: srcCallbacks, kind: itCbDemoted, tok: 1, s: tenure.ReasonShutDown.String(), flag: true})
	w.flush()
	release() // OnDemoted has not returned
	if got := w.chk.counts[Callbacks]; got != 1 || !strings.Contains(messages(w), "before the callbacks") {
		t.Fatalf("%d I4 violations, want 1:\n%s", got, messages(w))
	}
	w.stage(item{in: a, src: srcCallbacks, kind: itCbDemotedDone})
	w.flush()
	release()
	if got := w.chk.counts[Callbacks]; got != 1 {
		t.Fatalf("%d I4 violations, want still 1:\n%s", got, messages(w))
	}
}

// TestCheckerSeesLockFaults: for lock clients the checker flags two
// believers (I1), a token that does not rise (I2), a late answer (I5) and
// a grant past an older live fair waiter (I7), and lets a holder's belief
// end at its deadline.
func TestCheckerSeesLockFaults(t *testing.T) {
	w, a, b := testWorld(t)
	client := func(in *instance, ticket uint64) *lockClient {
		l := &lockClient{in: in, w: w, name: "lock/0", fair: true, ticket: ticket, bound: in.local().Add(time.Minute)}
		w.chk.asked(l)
		return l
	}
	older, younger := client(a, 3), client(b, 5)
	deadline := b.local().Add(10 * time.Second)
	w.chk.granted(younger, election.Term{Token: 10, Deadline: deadline})
	if w.chk.counts[FairOrder] != 1 {
		t.Errorf("a grant past an older live waiter: I7 counted %d times, want 1", w.chk.counts[FairOrder])
	}
	older.bound = a.local().Add(-time.Second)
	w.chk.answered(older, "granted")
	w.chk.granted(older, election.Term{Token: 9, Deadline: a.local().Add(10 * time.Second)})
	for inv, what := range map[Invariant]string{OneLeader: "two believers", Tokens: "a token below an earlier grant's", Liveness: "an answer past the deadline"} {
		if w.chk.counts[inv] != 1 {
			t.Errorf("%s: %v counted %d times, want 1", what, inv, w.chk.counts[inv])
		}
	}
	if got := messages(w); !strings.Contains(got, "b is granted lock/0 with ticket 5 while a waits, live, with ticket 3") {
		t.Errorf("violations:\n%s", got)
	}
	w.chk.released(a)
	w.now += 10 * time.Second // b's deadline: its belief is over, though its hold has not ended
	w.chk.granted(client(a, 0), election.Term{Token: 11})
	if w.chk.counts[OneLeader] != 1 {
		t.Errorf("a grant once the holder's deadline passed: I1 counted %d times, want 1\n%s", w.chk.counts[OneLeader], messages(w))
	}
}

// TestCheckerSeesShortTakeover: a takeover that lands before the record it
// replaces is its ttl old breaks I1 at the store, even with no second
// believer in sight (the holder crashed): what a notice or a wake-up that
// shortened a follower's wait would do. Renewals, a released record and a
// takeover once the ttl has passed do not; nor do a lock's.
func TestCheckerSeesShortTakeover(t *testing.T) {
	w, a, b := testWorld(t)
	s := w.store
	put := func(in *instance, reg *register, rec lease.Record) {
		r := &request{in: in, kind: election.OpPut, rec: rec, reg: reg}
		switch {
		case reg != nil && reg.exists:
			r.expect = reg.ver
		case reg == nil && s.exists:
			r.expect = s.ver
		default:
			r.expect = lease.NoVersion
		}
		s.arrive(r)
		if r.res.err != nil {
			t.Fatalf("%s's write refused: %v", in.label, r.res.err)
		}
	}
	held := lease.Record{Holder: "b", Token: 5, Duration: 10 * time.Second}
	put(b, nil, held)
	w.now = 2 * time.Second
	put(b, nil, held) // a renewal
	w.now = 11 * time.Second
	put(a, nil, lease.Record{Holder: "a", Token: 6, Duration: 10 * time.Second}) // 9s after the renewal
	if w.chk.counts[OneLeader] != 1 || !strings.Contains(messages(w), "a takes sim/lease (token 5) 9s after b wrote it, before its lease of 10s ran out") {
		t.Fatalf("a takeover 9s into a 10s lease: I1 counted %d times\n%s", w.chk.counts[OneLeader], messages(w))
	}
	w.now = 21 * time.Second
	put(b, nil, lease.Record{Holder: "b", Token: 7, Duration: 10 * time.Second}) // 10s after: on time
	w.now = 22 * time.Second
	put(b, nil, lease.Record{Holder: "b", Token: 7, Duration: 10 * time.Second, Released: true})
	put(a, nil, lease.Record{Holder: "a", Token: 8, Duration: 10 * time.Second}) // released: at once
	lk := &register{name: "lock/0"}
	s.regs = map[string]*register{lk.name: lk}
	put(b, lk, held)
	w.now = 23 * time.Second
	put(a, lk, lease.Record{Holder: "a", Token: 6, Duration: 10 * time.Second})
	if w.chk.counts[OneLeader] != 2 {
		t.Fatalf("I1 counted %d times, want 2: the short lock takeover only\n%s", w.chk.counts[OneLeader], messages(w))
	}
}

// TestCheckerSeesTimedUnreadRecords: a follower that times a feed event
// as a renewal of the term it last read, though the event's record is
// another term's (a new holder, a new lease duration), breaks I1 in
// feed-mixed-ttl (4 seeds of the 20): it waits out the old holder's lease,
// not the new one's, where that is shorter.
// The real code times only a record whose holder, token and lease duration
// it read, and breaks nothing over the same seeds.
func TestCheckerSeesTimedUnreadRecords(t *testing.T) {
	sc := Lookup("feed-mixed-ttl")
	broke := 0
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(sc, seed, Options{trustRecords: true}); r.Counts[OneLeader] > 0 {
			broke++
		}
		if r := Run(sc, seed, Options{}); r.Failed() {
			t.Errorf("seed %d: %v", seed, r)
		}
	}
	if broke == 0 {
		t.Error("a follower that times records it has not read, and I1 holds in 20 seeds of feed-mixed-ttl")
	}
}

// TestCheckerSeesTrustedFeed: a follower that lets a change feed's event
// shorten its takeover (it takes the lease at the read after one, whoever
// holds it) breaks I1 in every run of feed-crash, at the store even where
// the holder had crashed; the real code, which only reads on events,
// breaks nothing over the same seeds.
func TestCheckerSeesTrustedFeed(t *testing.T) {
	sc := Lookup("feed-crash")
	for seed := uint64(1); seed <= 5; seed++ {
		if r := Run(sc, seed, Options{trustFeed: true}); r.Counts[OneLeader] == 0 {
			t.Errorf("seed %d: a follower that trusts the feed's events, and I1 holds:\n%v", seed, r)
		}
		if r := Run(sc, seed, Options{}); r.Failed() {
			t.Errorf("seed %d: %v", seed, r)
		}
	}
}

// TestCheckerSeesLostTakeoverTokens: candidates that mint tokens as on a
// store that loses nothing (no ClockTokens) mint a lost takeover's token
// again, or one below it, after a failover of a Lossy store: I2 breaks in
// lost-writes. The real code mints every takeover from the wall clock
// there and breaks nothing over the same seeds.
func TestCheckerSeesLostTakeoverTokens(t *testing.T) {
	sc := Lookup("lost-writes")
	broke := 0
	for seed := uint64(1); seed <= 20; seed++ {
		if r := Run(sc, seed, Options{plainTokens: true}); r.Counts[Tokens] > 0 {
			broke++
		}
		if r := Run(sc, seed, Options{}); r.Failed() {
			t.Errorf("seed %d: %v", seed, r)
		}
	}
	if broke == 0 {
		t.Error("candidates that mint plain tokens on a Lossy store, and I2 holds in 20 seeds of lost-writes")
	}
	t.Logf("plain tokens broke I2 in %d of 20 seeds", broke)
}
