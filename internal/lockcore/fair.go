package lockcore

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// Fair waiting. A fair waiter takes a ticket in the lock's queue and may
// campaign for the lock only while its ticket is the oldest live one. The
// queue is records of the lock's own store, kept by compare-and-swap:
//
//   - the index, NAME::queue: the next ticket (its token) and the waiting
//     entries in ticket order, each a ticket and a slot ("17/3 18/0");
//   - a slot record per entry, NAME::queue.SLOT (SLOT below MaxWaiters),
//     which its waiter holds like a lease: its ticket as the token, its
//     heartbeat as the version, and a duration of its own.
//
// The index is written only when a waiter joins or leaves, or drops an
// abandoned entry: heartbeats go to each waiter's own slot, so waiters do
// not refuse each other's writes. Each waiter watches the entry just ahead
// of it (its predecessor), reading that slot record, and nothing else of
// the queue, while that one beats: it learns there that its predecessor
// left (the slot given back, or taken by a later ticket), or that it went
// silent. An entry whose slot
// the waiter behind it saw unchanged for the slot's duration × (1+MaxDrift)
// on its own clock is abandoned, exactly as a lease is: that waiter writes
// the slot given back (a tombstone, by compare-and-swap on the version it
// saw, so that a heartbeat landing meanwhile makes it fail) and then drops
// the entry from the index. The abandoned waiter, should it come back,
// finds its slot taken at its next heartbeat and queues again at the back;
// its gate shut a lead window after its last confirmed heartbeat was sent,
// before anyone could drop it. Several silent entries in a row are dropped
// one after another, a wait each.
//
// Heartbeats are as seldom as the distance from the head allows: the head
// and the waiter behind it (places up to Near) declare the lock's lease and
// beat as a lease's renewals may come (a beat may time out and be retried
// once), and the one behind the head reads the slot ahead every poll; the
// others declare FarLeases leases, beat that much less often, and read the
// slot ahead every FarWatch polls: only the waiter next to the head becomes
// the head when the head leaves. A waiter says its position in its slot, so that the one behind it
// learns when it comes near the head without reading the index. When the
// waiter ahead misses its heartbeats for a lead window, a waiter reads every
// slot ahead of it, so that a run of abandoned entries is waited out once,
// not once each; a waiter that finds the queue full reads them all. Nothing
// grows without bound: one index and at most MaxWaiters slots per lock,
// slots reused.
//
// Fairness holds among fair waiters: a Lock without Fair, or a TryLock, may
// still take a free lock first. Safety does not depend on the queue: the
// lock itself is taken by compare-and-swap as always.

// QueueSuffix names a lock's queue index; lock names may not contain "::".
const QueueSuffix = "::queue"

// MaxWaiters bounds a queue: its index lists every entry, and there are
// as many slots.
const MaxWaiters = 64

// Near is the farthest place from the head (0) whose waiter declares the
// lock's lease in its slot and reads the slot ahead every poll.
const Near = 1

// FarLeases is how many of the lock's leases the slot of a waiter farther
// than Near from the head declares, and FarWatch how many polls apart that
// waiter reads the slot ahead of it.
const (
	FarLeases = 3
	FarWatch  = 3
)

// The records of a lock, for Host.Call: the lock's own, its queue's
// index, and slots 0 to MaxWaiters-1.
const (
	RecLock  = -2
	RecIndex = -1
)

// RecordName names record rec of the lock name.
func RecordName(name string, rec int) string {
	switch rec {
	case RecLock:
		return name
	case RecIndex:
		return name + QueueSuffix
	case RecWake:
		return name + WakeSuffix
	}
	return name + QueueSuffix + "." + strconv.Itoa(rec)
}

// LongestName is the longest name of the records of a fair lock on name.
func LongestName(name string) string { return RecordName(name, MaxWaiters-1) }

// ErrQueueFull was returned to a fair waiter whose queue held MaxWaiters.
// It no longer is: a full queue is waited out (its abandoned entries are
// dropped a lease after they went silent, and live ones leave), so that
// dead waiters can never keep a lock from being taken.
var ErrQueueFull = errors.New("tenure: the lock's queue is full")

type qentry struct {
	ticket uint64
	slot   int
}

// appendQueue parses b, "TICKET/SLOT TICKET/SLOT ...", onto q.
func appendQueue(q []qentry, b []byte) ([]qentry, error) {
	for _, f := range strings.Fields(string(b)) {
		t, s, ok := strings.Cut(f, "/")
		tn, err1 := strconv.ParseUint(t, 10, 64)
		sn, err2 := strconv.Atoi(s)
		if !ok || err1 != nil || err2 != nil || tn == 0 || sn < 0 || sn >= MaxWaiters {
			return nil, fmt.Errorf("queue entry %q is not TICKET/SLOT with a slot below %d", f, MaxWaiters)
		}
		q = append(q, qentry{tn, sn})
	}
	return q, nil
}

func formatQueue(q []qentry) []byte {
	b := make([]byte, 0, 8*len(q)) // "12/34 " and the like: one allocation
	for i, e := range q {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, e.ticket, 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(e.slot), 10)
	}
	return b
}

// watched is an entry ahead of ours, and its slot as we saw it.
type watched struct {
	e      qentry
	ver    lease.Version
	found  bool          // its slot existed when last seen
	seen   bool          // ver is a version we saw (NoVersion: no record)
	since  time.Time     // when we first saw ver
	dropAt time.Time     // it is abandoned then unless its slot changes
	due    time.Time     // the next read
	pos    int           // the position its slot last said; -1 unknown
	d      time.Duration // the lease its slot declares
	tomb   bool          // give its slot back for it: it is silent
	stale  bool          // its slot held a later ticket, and the index still listed it
	gone   bool          // it left, or we gave its slot back: drop its entry
}

// queueOp is the queue call in flight.
type queueOp uint8

const (
	opNone      queueOp = iota
	opReadIndex         // read the index
	opJoin              // add our entry to the index
	opDrop              // drop our predecessor's entry from the index
	opLeave             // drop our own entry from the index
	opBeat              // write our slot: a heartbeat
	opFree              // give our slot back
	opWatch             // read our predecessor's slot
	opTomb              // give our silent predecessor's slot back for it
	opReadSlot          // read our slot after a conflict that did not show it
	opWakeHead          // read the new head's slot, to wake it: we left from the head
)

// fairState is a fair waiter's place in its lock's queue; the loop's.
type fairState struct {
	// The index, as our last call on it found it.
	idx      lease.Record
	idxVer   lease.Version
	idxFound bool
	idxKnown bool
	idxFresh bool     // read or written since we last tried to join
	q        []qentry // idx's entries, parsed when idx changes
	qErr     error    // or why they cannot be

	// Our entry.
	ticket     uint64 // 0: none (as far as we know)
	slot       int
	slotVer    lease.Version // our slot's version after our last confirmed write; "" none
	expect     lease.Version // what our next write of the slot expects
	beatPos    int           // the position our last confirmed beat said; -1 none
	sentPos    int           // the position the beat in flight says
	readSlot   bool          // a write on our slot was refused without showing it
	recheck    bool          // our slot holds a later ticket: read the index before we give up our entry
	recheckVer lease.Version
	beatDue    time.Time // the next heartbeat
	shut       time.Time // a lead window after the last confirmed heartbeat was sent
	pos        int       // our place: 0 the head; -1 not in the queue
	addr       string    // said in our slot (the wake-up address)
	joinSlot   int       // the slot our join write in flight takes

	// The entries ahead whose slots we read, nearest first: our
	// predecessor alone, or, while it looks silent, every entry ahead
	// (scan), so that a run of abandoned entries is waited out once, not
	// once each. A waiter that finds the queue full scans it all.
	watch    []watched
	watching uint64 // the ticket whose slot the read or write in flight is on
	scan     bool

	op       queueOp
	callAt   time.Time // when the call in flight was sent
	next     time.Time // the next queue step; zero: none
	leaving  bool      // leave the queue (we got the lock, or gave up)
	wakeHead bool      // we left from the head: wake the new one (SetWake)
	gone     bool      // out of the queue for good
	full     bool      // the queue was full at our last try (said once)
	idxDue   time.Time // full: when to read the index again
	open     bool      // the gate is open: our turn
	inFlight bool
}

func (f *fairState) setIndex(rec lease.Record, ver lease.Version, found bool) {
	f.idx, f.idxVer, f.idxFound, f.idxKnown, f.idxFresh = rec, ver, found, true, true
	f.q, f.qErr = appendQueue(f.q[:0], rec.Payload)
}

// index returns the position of ticket t in the index as known, or -1.
func (f *fairState) index(t uint64) int {
	for i, e := range f.q {
		if e.ticket == t {
			return i
		}
	}
	return -1
}

// queueStep runs the queue action that is due: a call, or nothing yet.
func (l *Lock) queueStep() {
	f := l.fair
	f.next = time.Time{}
	if f.inFlight || f.gone || l.wakeBusy() { // wakeResult plans the step again
		return
	}
	now := l.h.Now()
	if f.leaving {
		l.leaveStep()
		return
	}
	if !f.idxKnown {
		l.queueCall(opReadIndex, RecIndex, election.Op{Kind: election.OpGet})
		return
	}
	err := f.qErr
	if err == nil && f.idxFound && f.idx.Holder != queueHolder {
		err = fmt.Errorf("held by %q, not %q", f.idx.Holder, queueHolder)
	}
	if err != nil {
		l.withoutQueue(err)
		return
	}
	if f.ticket != 0 && f.index(f.ticket) < 0 {
		// Dropped as abandoned (we were cut off, or paused): queue again.
		f.ticket, f.pos, f.idxFresh, f.recheck = 0, -1, true, false
		l.gate(now)
	}
	if f.recheck && f.ticket != 0 {
		// Still listed: what our slot holds is older than the index.
		f.recheck, f.expect = false, f.recheckVer
	}
	if f.ticket == 0 && f.idxFresh {
		f.idxFresh = false
		if l.join(now) {
			return
		}
	}
	l.place(now)
	var due *watched
	for i := range f.watch {
		if w := &f.watch[i]; due == nil || w.due.Before(due.due) {
			due = w
		}
	}
	switch {
	case slices.ContainsFunc(f.watch, func(w watched) bool { return w.gone }):
		l.writeIndex(opDrop, 0, qentry{})
	case f.readSlot:
		l.queueCall(opReadSlot, f.slot, election.Op{Kind: election.OpGet})
	case slices.ContainsFunc(f.watch, func(w watched) bool { return w.tomb }):
		w := &f.watch[slices.IndexFunc(f.watch, func(w watched) bool { return w.tomb })]
		cfg := l.Config()
		rec := lease.Record{Holder: queueHolder, Token: w.e.ticket, Duration: cfg.LeaseDuration, Released: true, Nonce: l.nonce()}
		expect := w.ver
		if !w.found {
			expect = lease.NoVersion
		}
		f.watching = w.e.ticket
		l.queueCall(opTomb, w.e.slot, election.Op{Kind: election.OpPut, Record: rec, Expect: expect})
	case f.ticket != 0 && (f.slotVer == "" || class(f.pos) != class(f.beatPos) || !now.Before(f.beatDue)):
		// Our first beat, a move nearer the head (a shorter lease to
		// declare, a place to say), or one due.
		l.beat()
	case due != nil && !now.Before(due.due):
		f.watching = due.e.ticket
		l.queueCall(opWatch, due.e.slot, election.Op{Kind: election.OpGet})
	case f.ticket == 0 && !now.Before(f.idxDue): // full: look again
		f.idxKnown = false
		l.queueCall(opReadIndex, RecIndex, election.Op{Kind: election.OpGet})
	case f.ticket == 0:
		f.next = f.idxDue
		if due != nil && due.due.Before(f.next) {
			f.next = due.due
		}
	default:
		f.next = f.beatDue
		if due != nil && due.due.Before(f.next) {
			f.next = due.due
		}
	}
}

// place works out our position from the index, and what our
// predecessor's slot last said, and which slots to watch: the entries
// ahead of ours (all of them when we are not in a full queue), nearest
// first, our predecessor alone unless we scan.
func (l *Lock) place(now time.Time) {
	f := l.fair
	i := f.index(f.ticket)
	ahead := f.q
	if i >= 0 {
		ahead = f.q[:i]
	} else if !f.full {
		ahead = nil
	}
	if len(f.watch) > 0 && !f.scan && !f.full {
		w := &f.watch[0]
		// Our predecessor missed its heartbeats for a lead window: look
		// at every entry ahead, so that their waits run side by side.
		cfg := l.Config()
		f.scan = w.seen && !now.Before(w.since.Add(election.LeadWindow(w.d, cfg.MaxDrift, cfg.Margin)))
	}
	n := len(ahead)
	if !f.scan && !f.full {
		n = min(n, 1)
	}
	old := f.watch
	f.watch = make([]watched, 0, n)
	for k := len(ahead) - 1; k >= len(ahead)-n; k-- {
		e := ahead[k]
		w := watched{e: e, due: now, pos: -1} // not seen yet: look at once
		for _, o := range old {
			if o.e == e {
				w = o
			}
		}
		f.watch = append(f.watch, w)
	}
	f.pos = i
	if i > 0 && len(f.watch) > 0 && f.watch[0].pos >= 0 && f.watch[0].pos+1 < f.pos {
		f.pos = f.watch[0].pos + 1 // entries ahead left since we read the index
	}
	l.gate(now)
}

// class is what a position means for a waiter's slot: 0 the head, then
// each place up to Near, then any farther.
func class(pos int) int { return min(max(pos, -1), Near+1) }

// join adds our entry at the back of the queue, in the lowest free slot,
// and reports whether it sent the write.
func (l *Lock) join(now time.Time) bool {
	f := l.fair
	var used [MaxWaiters]bool
	for _, e := range f.q {
		used[e.slot] = true
	}
	slot := -1
	for s, u := range used {
		if !u {
			slot = s
			break
		}
	}
	if slot < 0 {
		// Full: wait until an entry leaves, or is dropped as abandoned.
		if !f.full {
			l.h.Log(slog.LevelError, "lock queue full: waiting for a waiter to leave or to be found abandoned", "lock", l.name, "waiters", len(f.q))
		}
		// Meanwhile, watch every entry, so as to find those abandoned.
		f.full, f.idxDue = true, now.Add(l.Config().PollInterval)
		return false
	}
	next := f.idx.Token
	if !f.idxFound {
		next = 1
	}
	if next >= 1<<63-1 {
		l.withoutQueue(fmt.Errorf("its ticket counter is at %d, the most a token may hold", next))
		return true
	}
	f.full = false
	f.joinSlot = slot
	l.writeIndex(opJoin, 0, qentry{next, slot})
	return true
}

// writeIndex writes the index without the entry of ticket drop (if any)
// and those of watched entries gone, with add at the back (if any).
func (l *Lock) writeIndex(op queueOp, drop uint64, add qentry) {
	f := l.fair
	q := make([]qentry, 0, len(f.q)+1)
	for _, e := range f.q {
		if e.ticket != drop && !slices.ContainsFunc(f.watch, func(w watched) bool { return w.gone && w.e == e }) {
			q = append(q, e)
		}
	}
	next := max(f.idx.Token, 1)
	if add.ticket != 0 {
		q = append(q, add)
		next = add.ticket + 1
	}
	cfg := l.Config()
	rec := lease.Record{Holder: queueHolder, Token: next, Duration: cfg.LeaseDuration, Nonce: l.nonce(), Payload: formatQueue(q)}
	expect := f.idxVer
	if !f.idxFound {
		expect = lease.NoVersion
	}
	l.queueCall(op, RecIndex, election.Op{Kind: election.OpPut, Record: rec, Expect: expect})
}

// beat writes our slot: our ticket, the lease our place calls for, and our
// place (and wake-up address) for the waiter behind us.
func (l *Lock) beat() {
	f := l.fair
	cfg := l.Config()
	payload := strconv.AppendInt(nil, int64(f.pos), 10)
	if f.addr != "" {
		payload = append(append(payload, ' '), f.addr...)
	}
	rec := lease.Record{Holder: cfg.ID, Token: f.ticket, Duration: l.slotLease(f.pos), Nonce: l.nonce(), Payload: payload}
	f.sentPos = f.pos
	l.queueCall(opBeat, f.slot, election.Op{Kind: election.OpPut, Record: rec, Expect: f.expect})
}

// slotLease is the lease a waiter at pos declares in its slot.
func (l *Lock) slotLease(pos int) time.Duration {
	d := l.Config().LeaseDuration
	if pos > Near {
		d = min(FarLeases*d, lease.MaxDuration)
	}
	return d
}

// beatEvery returns how long after a confirmed heartbeat declaring the
// lease d the next is due: as seldom as a lease's renewals may come (a
// beat that times out, a backoff, and a second try still land within the
// lead window, well before others could drop the entry after d × (1+ρ)).
func (l *Lock) beatEvery(d time.Duration) time.Duration { return beatEvery(l.Config().Timing, d) }

func beatEvery(t election.Timing, d time.Duration) time.Duration {
	return max(t.RenewInterval, election.LeadWindow(d, t.MaxDrift, t.Margin)-2*t.OpTimeout-t.RetryMax)
}

// watchEvery returns how often a waiter at pos reads its predecessor's
// slot: every poll next to the head, whose leaving makes it the head;
// every FarWatch polls farther back, where it only learns that it moves up.
func (l *Lock) watchEvery(pos int) time.Duration { return watchEvery(l.Config().Timing, pos) }

func watchEvery(t election.Timing, pos int) time.Duration {
	if pos <= Near {
		return t.PollInterval
	}
	return FarWatch * t.PollInterval
}

// WaiterRequestsPerHour returns the store requests a fair waiter makes per
// hour, on average over n waiters queued behind a holder, at timing t
// (defaults filled in): the head reads the lock every poll and beats; the
// others read the lock every GatedPoll, the slot ahead every watchEvery,
// and beat every beatEvery of the lease their place declares.
func WaiterRequestsPerHour(t election.Timing, n int) (reads, writes float64) {
	t = t.WithDefaults()
	per := func(d time.Duration) float64 { return float64(time.Hour) / float64(d) }
	for pos := range n {
		d := t.LeaseDuration
		if pos > Near {
			d = min(FarLeases*d, lease.MaxDuration)
		}
		writes += per(beatEvery(t, d))
		if pos == 0 {
			reads += per(t.PollInterval)
			continue
		}
		reads += per(election.GatedPoll(t)) + per(watchEvery(t, pos))
	}
	n = max(n, 1)
	return reads / float64(n), writes / float64(n)
}

// leaveStep drops our entry from the index, then gives our slot back.
func (l *Lock) leaveStep() {
	f := l.fair
	switch {
	case f.ticket != 0 && !f.idxKnown:
		l.queueCall(opReadIndex, RecIndex, election.Op{Kind: election.OpGet})
	case f.ticket != 0 && f.index(f.ticket) >= 0:
		l.writeIndex(opLeave, f.ticket, qentry{})
	case f.slotVer != "" && f.ticket != 0:
		rec := lease.Record{Holder: l.Config().ID, Token: max(f.ticket, 1), Duration: l.Config().LeaseDuration, Released: true, Nonce: l.nonce()}
		l.queueCall(opFree, f.slot, election.Op{Kind: election.OpPut, Record: rec, Expect: f.slotVer})
	case f.wakeHead && f.idxKnown && len(f.q) > 0:
		// Our entry and slot are gone: the new head, woken, finds so at
		// once, takes its turn, and names itself in the wake record before
		// we unlock, rather than a poll later.
		f.wakeHead = false
		l.queueCall(opWakeHead, f.q[0].slot, election.Op{Kind: election.OpGet})
	default:
		f.gone = true
	}
}

// nonce returns a write nonce for a queue record.
func (l *Lock) nonce() string { return strconv.FormatUint(l.Config().Rand.Uint64(), 16) }

// queueHolder is the holder of every index record, and of a slot given
// back for a silent waiter.
const queueHolder = "tenure-queue"

// abandonAfter is how long a slot declaring the lease d must stay
// unchanged for its entry to count as abandoned: d × (1+ρ).
func (l *Lock) abandonAfter(d time.Duration) time.Duration {
	return election.WaitBeforeTakeover(max(d, lease.MinDuration), l.Config().MaxDrift)
}

// queueCall sends a call on record rec of the lock's queue.
func (l *Lock) queueCall(op queueOp, rec int, call election.Op) {
	f := l.fair
	f.op, f.inFlight, f.callAt = op, true, l.h.Now()
	l.h.Call(call, rec)
}

// QueueResult takes the answer of a call on the lock's queue, or on its
// wake record; put says whether it was a write.
func (l *Lock) QueueResult(r election.Result, put bool) {
	if l.wakeBusy() { // never in flight beside a queue call
		l.wakeResult(r)
	} else {
		l.queueResult(r)
	}
	l.after()
}

// queueResult decides what the answer means for our place and our turn.
func (l *Lock) queueResult(r election.Result) {
	f := l.fair
	op := f.op
	f.op, f.inFlight = opNone, false
	now := l.h.Now()
	f.next = now // by default, decide the next step at once
	var ce *lease.ConflictError
	if r.Err != nil {
		ce = conflict(r.Err)
	}
	notFound := errors.Is(r.Err, lease.ErrNotFound)
	if r.Err != nil && ce == nil && !notFound && !errors.Is(r.Err, lease.ErrConflict) &&
		(errors.Is(r.Err, lease.ErrInvalidRecord) || errors.Is(r.Err, lease.ErrPermanent)) && (op == opReadIndex || op == opJoin) {
		// Garbage in the index, or a queue we may not write: retrying
		// cannot cure it, and it must not keep a free lock from being
		// taken.
		l.withoutQueue(r.Err)
		return
	}
	switch op {
	case opReadIndex:
		switch {
		case r.Err == nil:
			f.setIndex(r.Record, r.Version, true)
		case notFound:
			f.setIndex(lease.Record{}, lease.NoVersion, false)
		default:
			f.next = now.Add(l.Config().RetryMax)
		}
	case opJoin, opDrop, opLeave:
		switch {
		case r.Err == nil:
			f.setIndex(r.Record, r.Version, true)
			if op == opJoin {
				f.ticket, f.slot = r.Record.Token-1, f.joinSlot
				f.slotVer, f.expect, f.beatPos, f.pos = "", lease.NoVersion, -1, -1
			}
			if op == opDrop {
				f.full = false // a slot may be free now
			}
		case ce != nil:
			f.setIndex(ce.Current, ce.Version, ce.Found)
		default:
			// Unknown, or refused without the record: read it again. A
			// join that did land leaves an entry nobody beats, dropped in
			// time; a leave that did not is retried.
			f.idxKnown = false
			if op == opLeave && !errors.Is(r.Err, lease.ErrConflict) {
				f.ticket = 0 // best effort: the waiter behind drops it in time
			}
			if !errors.Is(r.Err, lease.ErrConflict) {
				f.next = now.Add(l.Config().RetryMax)
			}
		}
	case opBeat:
		l.beatResult(r, ce, now)
	case opReadSlot:
		switch {
		case r.Err == nil:
			l.slotConflict(true, r.Record, r.Version)
		case notFound:
			l.slotConflict(false, lease.Record{}, lease.NoVersion)
		default:
			f.next = now.Add(l.Config().RetryMax)
		}
	case opFree:
		f.slotVer, f.ticket = "", 0 // given back, taken by another, or left to lapse
	case opWakeHead:
		if _, addr, _ := strings.Cut(string(r.Record.Payload), " "); r.Err == nil && addr != "" &&
			!r.Record.Released && r.Record.Holder != l.Config().ID {
			l.h.WakeNext(addr)
		}
	case opWatch, opTomb:
		w := l.watchedEntry(f.watching)
		switch {
		case w == nil: // no longer watched
		case op == opWatch && r.Err == nil:
			l.watched(w, now, true, r.Record, r.Version)
		case op == opWatch && notFound:
			l.watched(w, now, false, lease.Record{}, lease.NoVersion)
		case op == opTomb && r.Err == nil:
			w.tomb, w.gone = false, true
		case op == opTomb && ce != nil:
			w.tomb = false
			l.watched(w, now, ce.Found, ce.Current, ce.Version) // it changed after all
		default:
			// Read it again (a tombstone may have landed), after a backoff
			// unless the store refused the write.
			w.tomb, w.due = false, now
			if !errors.Is(r.Err, lease.ErrConflict) {
				w.due = now.Add(l.Config().RetryMax)
			}
		}
	}
	if f.next == (time.Time{}) {
		f.next = now
	}
	l.gate(now)
}

// beatResult takes the answer to a heartbeat.
func (l *Lock) beatResult(r election.Result, ce *lease.ConflictError, now time.Time) {
	f := l.fair
	cfg := l.Config()
	switch {
	case r.Err == nil:
		f.slotVer, f.expect, f.beatPos = r.Version, r.Version, f.sentPos
		f.shut = f.callAt.Add(election.LeadWindow(r.Record.Duration, cfg.MaxDrift, cfg.Margin))
		f.beatDue = now.Add(l.beatEvery(r.Record.Duration))
	case ce != nil:
		l.slotConflict(ce.Found, ce.Current, ce.Version)
	case errors.Is(r.Err, lease.ErrConflict):
		f.readSlot = true // the store did not say what is there: read it
	default:
		f.next = now.Add(cfg.RetryMax)
	}
}

// slotConflict takes what our slot holds after a write of ours on it was
// refused.
func (l *Lock) slotConflict(found bool, cur lease.Record, ver lease.Version) {
	f := l.fair
	f.readSlot = false
	switch {
	case !found || cur.Token < f.ticket || cur.Token == f.ticket && cur.Holder == l.Config().ID && !cur.Released:
		// A slot left by an earlier waiter, or one of our writes that
		// landed unconfirmed: write on what is there.
		f.expect = ver
		if !found {
			f.expect = lease.NoVersion
		}
	case cur.Token > f.ticket && !f.recheck:
		// Taken by a later ticket, so we were dropped; or left from before
		// the index was made anew (tenure gc, a repair): the index tells.
		f.recheck, f.recheckVer, f.idxKnown = true, ver, false
	default:
		// Given back for us (we went silent), or taken by a later ticket:
		// we were dropped. Queue again.
		f.ticket, f.slotVer, f.pos, f.idxKnown, f.recheck = 0, "", -1, false, false
		f.shut = time.Time{}
	}
}

// watchedEntry returns the watched entry of ticket t, or nil.
func (l *Lock) watchedEntry(t uint64) *watched {
	for i := range l.fair.watch {
		if w := &l.fair.watch[i]; w.e.ticket == t {
			return w
		}
	}
	return nil
}

// watched takes what the slot of the watched entry w holds now.
func (l *Lock) watched(w *watched, now time.Time, found bool, rec lease.Record, ver lease.Version) {
	f := l.fair
	switch {
	case found && rec.Token > w.e.ticket && !w.stale:
		// Its slot was taken by a later ticket: it left the index first
		// (unless what its slot holds is older than the index: if the
		// index still lists it, it has yet to write its slot).
		w.stale, f.idxKnown = true, false
		return
	case found && rec.Token == w.e.ticket && rec.Released:
		// It left (and dropped its entry first, most likely: read the
		// index), or was dropped: drop the entry if it is still there.
		w.gone, f.idxKnown = true, false
		return
	}
	d := l.Config().LeaseDuration // not written yet: our lease
	if found && rec.Token == w.e.ticket {
		d = rec.Duration
		if p, _, _ := strings.Cut(string(rec.Payload), " "); p != "" {
			if n, err := strconv.Atoi(p); err == nil && n >= 0 {
				w.pos = n
			}
		}
	}
	if !w.seen || ver != w.ver || found != w.found {
		w.seen, w.ver, w.found, w.since, w.d = true, ver, found, now, d
		w.dropAt = now.Add(l.abandonAfter(d))
		if w == &f.watch[0] {
			f.scan = false // our predecessor is alive
		}
	} else if !now.Before(w.dropAt) {
		w.tomb = true
		return
	}
	// Where we stand may have changed with what it says.
	t := w.e.ticket
	l.place(now)
	if w = l.watchedEntry(t); w == nil {
		return
	}
	w.due = now.Add(l.watchEvery(f.pos))
	if at := w.dropAt; at.Before(w.due) && at.After(now) {
		w.due = at // look again when it would be abandoned
	}
}

// withoutQueue gives the queue up for good: the waiter campaigns for the
// lock as an unfair one would, and says why at error level (an operator
// repairs the queue with tenure release --force NAME::queue, or removes
// it).
func (l *Lock) withoutQueue(err error) {
	f := l.fair
	l.h.Log(slog.LevelError, "lock queue unusable; waiting without it, in no order", "lock", l.name, "queue", l.name+QueueSuffix, "err", err)
	f.gone, f.open, f.next = true, true, time.Time{}
	l.d.Gate(false)
}

// conflict returns the *lease.ConflictError in err, or nil. Apart, so that
// the variable errors.As needs escapes only where a call has failed.
func conflict(err error) *lease.ConflictError {
	var ce *lease.ConflictError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// gate opens the lock's gate while our entry is the first of the index
// and surely still in the queue: the waiter behind us drops it only after
// seeing our slot unchanged for its lease × (1+ρ), which on our clock is
// no sooner than shut. A waiter cut off from the store thus closes its gate
// before it can be dropped, and after it reconnects it takes its turn again
// only from a new ticket, behind those who waited meanwhile.
func (l *Lock) gate(now time.Time) {
	f := l.fair
	if f.gone || f.leaving {
		return
	}
	open := f.ticket != 0 && f.slotVer != "" && f.pos == 0 && len(f.watch) == 0 &&
		!f.shut.IsZero() && now.Before(f.shut)
	if open != f.open {
		f.open = open
		l.d.Gate(!open)
	}
}

// gateDue returns when the open gate must be looked at again; zero if it
// is not open.
func (l *Lock) gateDue() time.Time {
	if f := l.fair; f == nil || !f.open || f.gone || f.leaving {
		return time.Time{}
	}
	return l.fair.shut
}

// leaveQueue drops our entry: we got the lock, or gave up.
func (l *Lock) leaveQueue() {
	if f := l.fair; f != nil && !f.leaving && !f.gone {
		f.leaving = true
		f.wakeHead = f.open && f.addr != ""
		switch {
		case f.inFlight: // its answer leads on
		case f.ticket == 0 && f.slotVer == "":
			f.gone = true
		default:
			f.next = l.h.Now()
		}
	}
}
