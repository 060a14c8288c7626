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

// Fair waiting. A fair waiter takes a ticket in the lock's queue, a record
// of its own named NAME::queue in the same store (a counter of tickets and
// the list of waiting tickets with a heartbeat count each), keeps its entry
// alive by counting up its heartbeat (see beatEvery), and may campaign for
// the lock only while its ticket is the oldest live one. An entry whose
// heartbeat this waiter saw unchanged for the lock's lease × (1+MaxDrift) on
// its own clock is abandoned: it is skipped, and dropped from the queue by
// the next write. A waiter drops its own entry when it gets the lock or gives
// up. The queue is one small record per lock name, rewritten by compare-and-
// swap like a lease: nothing grows without bound, and no store needs more
// than the lease.Store contract.
//
// Fairness holds among fair waiters: a Lock without Fair, or a TryLock, may
// still take a free lock first. Safety does not depend on the queue: the
// lock itself is taken by compare-and-swap as always.

// QueueSuffix names a lock's queue record; lock names may not contain "::".
const QueueSuffix = "::queue"

// MaxWaiters bounds a queue: its record's payload holds every entry.
const MaxWaiters = 64

// ErrQueueFull was returned to a fair waiter whose queue held MaxWaiters.
// It no longer is: a full queue is waited out (its abandoned entries are
// dropped a lease after they went silent, and live ones leave), so that
// dead waiters can never keep a lock from being taken.
var ErrQueueFull = errors.New("tenure: the lock's queue is full")

type qentry struct{ ticket, beat uint64 }

func parseQueue(b []byte) ([]qentry, error) {
	return appendQueue(nil, b)
}

// appendQueue parses b, "TICKET.BEAT TICKET.BEAT ...", onto q.
func appendQueue(q []qentry, b []byte) ([]qentry, error) {
	for _, f := range strings.Fields(string(b)) {
		t, beat, ok := strings.Cut(f, ".")
		tn, err1 := strconv.ParseUint(t, 10, 64)
		bn, err2 := strconv.ParseUint(beat, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("queue entry %q is not TICKET.BEAT", f)
		}
		q = append(q, qentry{tn, bn})
	}
	return q, nil
}

func formatQueue(q []qentry) []byte {
	b := make([]byte, 0, 8*len(q)) // "12.3456 " and the like: one allocation
	for i, e := range q {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendUint(b, e.ticket, 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, e.beat, 10)
	}
	return b
}

// fairState is a fair waiter's place in its lock's queue; the loop's.
type fairState struct {
	ticket   uint64 // 0 until enqueued
	joining  bool   // the write in flight takes ticket: it is ours once confirmed
	rec      lease.Record
	ver      lease.Version
	found    bool
	known    bool       // rec, ver and found are what the store held at our last call
	seen     []seenBeat // q's entries, in q's order, as first seen with their beat
	seen2    []seenBeat // scratch for the next seen
	q        []qentry   // rec's entries, parsed when rec changes
	live     []qentry   // scratch for the entries a write keeps
	qErr     error      // or why they cannot be
	inFlight bool
	callAt   time.Time     // when the call in flight was sent
	shut     time.Time     // a lead window after the write that last confirmed our entry was sent; see shutAt
	wait     time.Duration // abandonAfter, once computed
	next     time.Time     // next queue action; zero: none
	leaving  bool          // drop our entry (we got the lock, or gave up)
	removing bool          // the write in flight drops our entry
	gone     bool          // our entry is out of the queue for good
	full     bool          // the queue was full at our last try (said once)
	open     bool          // the gate is open: our turn
	ahead    int           // live entries before ours at the last look; -1: ours is not in
}

// set records what the store holds, and parses its entries once.
func (f *fairState) set(rec lease.Record, ver lease.Version, found bool) {
	f.rec, f.ver, f.found, f.known = rec, ver, found, true
	f.q, f.qErr = appendQueue(f.q[:0], rec.Payload)
	// Keep what we saw of the entries still there, in q's order, and
	// forget the others: a ticket never comes back. Tickets are in rising
	// order (each new one goes last), so one pass finds them.
	next, j := f.seen2[:0], 0
	for _, e := range f.q {
		for j < len(f.seen) && f.seen[j].ticket < e.ticket {
			j++
		}
		s := seenBeat{ticket: e.ticket} // not seen yet: abandoned notes it
		if j < len(f.seen) && f.seen[j].ticket == e.ticket {
			s = f.seen[j]
		} else if k := slices.IndexFunc(f.seen, func(s seenBeat) bool { return s.ticket == e.ticket }); k >= 0 {
			s = f.seen[k] // out of order: not as our writes leave it
		}
		next = append(next, s)
	}
	f.seen, f.seen2 = next, f.seen
}

// seenBeat is a heartbeat as this waiter first saw it: on its own clock,
// the entry is abandoned at dropAt unless the beat changes first.
type seenBeat struct {
	ticket, beat uint64
	dropAt       time.Time
}

// queueStep runs the queue action that is due: read, or write our change.
func (l *Lock) queueStep() {
	f := l.fair
	f.next = time.Time{}
	if f.inFlight || f.gone {
		return
	}
	if !f.known {
		l.queueCall(election.Op{Kind: election.OpGet})
		return
	}
	q, err := f.q, f.qErr
	if err == nil && f.found && f.rec.Holder != queueHolder {
		err = fmt.Errorf("held by %q, not %q", f.rec.Holder, queueHolder)
	}
	if err != nil {
		l.withoutQueue(err)
		return
	}
	now := l.h.Now()
	live := f.live[:0] // formatQueue copies it out
	mine := false
	wait := l.abandonAfter()
	for i, qe := range q {
		switch {
		case qe.ticket == f.ticket && f.leaving:
		case qe.ticket == f.ticket:
			qe.beat++
			mine = true
			live = append(live, qe)
		case l.abandoned(i, now, wait):
		default:
			live = append(live, qe)
		}
	}
	next := f.rec.Token
	if !f.found {
		next = 1
	}
	switch {
	case f.leaving && !mine && len(live) == len(q):
		f.gone = true // nothing of ours to drop
		return
	case !f.leaving && (f.ticket == 0 || !mine):
		// Take a ticket (again, if our entry was dropped as abandoned).
		if len(live) >= MaxWaiters {
			// Full: wait until an entry leaves, or is seen silent for
			// the abandon wait (then the write that adds ours drops it).
			if !f.full {
				l.h.Log(slog.LevelError, "lock queue full: waiting for a waiter to leave or to be found abandoned", "lock", l.name, "waiters", len(live))
			}
			f.full, f.known = true, false
			f.next = now.Add(l.Config().PollInterval)
			return
		}
		if next >= 1<<63-1 {
			l.withoutQueue(fmt.Errorf("its ticket counter is at %d, the most a token may hold", next))
			return
		}
		f.full = false
		f.ticket, f.joining = next, true
		next++
		live = append(live, qentry{f.ticket, 0})
	}
	f.removing = f.leaving
	cfg := l.Config()
	rec := lease.Record{Holder: queueHolder, Token: max(next, 1), Duration: cfg.LeaseDuration,
		Nonce: strconv.FormatUint(cfg.Rand.Uint64(), 16), Payload: formatQueue(live)}
	f.live = live
	expect := f.ver
	if !f.found {
		expect = lease.NoVersion
	}
	l.queueCall(election.Op{Kind: election.OpPut, Record: rec, Expect: expect})
}

// queueHolder is the holder of every queue record.
const queueHolder = "tenure-queue"

// abandonAfter is how long a heartbeat must stay unchanged for its entry to
// count as abandoned: the lock's lease × (1+ρ).
func (l *Lock) abandonAfter() time.Duration {
	if f := l.fair; f.wait == 0 {
		cfg := l.Config()
		f.wait = election.WaitBeforeTakeover(cfg.LeaseDuration, cfg.MaxDrift)
	}
	return l.fair.wait
}

// abandoned reports whether this waiter saw the heartbeat of q's entry i
// unchanged for wait (abandonAfter) on its own clock; it notes every new
// beat.
func (l *Lock) abandoned(i int, now time.Time, wait time.Duration) bool {
	f := l.fair
	s, qe := &f.seen[i], f.q[i]
	if s.dropAt.IsZero() || s.beat != qe.beat {
		*s = seenBeat{qe.ticket, qe.beat, now.Add(wait)}
		return false
	}
	return !now.Before(s.dropAt)
}

// queueCall sends a call on the queue record.
func (l *Lock) queueCall(op election.Op) {
	l.fair.inFlight = true
	l.fair.callAt = l.h.Now()
	l.h.Call(op, true)
}

// QueueResult takes the answer of a call on the lock's queue record; put
// says whether it was a write.
func (l *Lock) QueueResult(r election.Result, put bool) {
	l.queueResult(r, put)
	l.after()
}

// queueResult decides what the queue's new state means for our turn.
func (l *Lock) queueResult(r election.Result, put bool) {
	f := l.fair
	f.inFlight = false
	if f.joining && (r.Err != nil || !put) {
		// Not confirmed: another waiter may hold that number now. A write
		// that did land leaves an entry nobody beats, skipped in time.
		f.ticket = 0
	}
	f.joining = false
	now := l.h.Now()
	var ce *lease.ConflictError
	if r.Err != nil {
		ce = conflict(r.Err)
	}
	switch {
	case r.Err == nil && put:
		f.set(r.Record, r.Version, true)
		if f.ticket != 0 && slices.ContainsFunc(f.q, func(e qentry) bool { return e.ticket == f.ticket }) {
			cfg := l.Config()
			f.shut = f.callAt.Add(election.LeadWindow(cfg.LeaseDuration, cfg.MaxDrift, cfg.Margin))
		}
		switch {
		case f.removing:
			f.gone = true
			return
		case f.leaving: // a heartbeat landed after we decided to leave
			f.next = now
			return
		}
		l.gate(now)
		f.next = now.Add(l.beatEvery())
		return
	case r.Err == nil:
		f.set(r.Record, r.Version, true)
		f.next = now
	case errors.Is(r.Err, lease.ErrNotFound):
		f.set(lease.Record{}, lease.NoVersion, false)
		f.next = now
	case ce != nil:
		f.set(ce.Current, ce.Version, ce.Found)
		f.next = now // try our change again on what is there
	case errors.Is(r.Err, lease.ErrConflict):
		f.known = false
		f.next = now
	case f.leaving: // best effort: others skip an abandoned entry anyway
		f.gone = true
		return
	case errors.Is(r.Err, lease.ErrInvalidRecord) || errors.Is(r.Err, lease.ErrPermanent):
		// Garbage in the queue's record, or a queue we may not write:
		// retrying cannot cure it, and it must not keep a free lock from
		// being taken.
		l.withoutQueue(r.Err)
		return
	default:
		f.known = false
		f.next = now.Add(l.Config().RetryMax)
		return
	}
	l.gate(now)
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

// gate opens the lock's gate while our ticket is the oldest live one, and
// our entry is surely still in the queue: others drop an entry whose
// heartbeat they saw unchanged for the lease × (1+ρ), which on our clock is
// no sooner than shutAt. A waiter cut off from the store thus closes its
// gate before others can drop it, and after it reconnects it takes its turn
// again only from a new ticket, behind those who waited meanwhile.
func (l *Lock) gate(now time.Time) {
	f := l.fair
	if f.gone || f.leaving {
		return
	}
	open := f.open // while the queue is unknown (a failed call), as it was
	switch {
	case f.ticket == 0:
		open, f.ahead = false, -1
	case f.known:
		f.ahead = -1
		n, wait := 0, l.abandonAfter()
		for i, qe := range f.q {
			if qe.ticket == f.ticket {
				f.ahead = n
				break
			}
			if !l.abandoned(i, now, wait) {
				n++
			}
		}
		open = f.ahead == 0
	}
	if open && (f.shut.IsZero() || !now.Before(f.shut)) {
		open = false
	}
	if open != f.open {
		f.open = open
		l.d.Gate(!open)
	}
}

// beatEvery returns how long after a confirmed heartbeat the next is due.
// The head of the queue and the two waiters behind it beat every
// RenewInterval: the head to keep its gate open, the others to learn soon
// that their turn came (a waiter learns it from its own writes, and the
// head leaves the queue when it takes the lock, or gives up). The rest
// beat as seldom as a lease's renewals may come: a beat that times out, a
// backoff, and a second try still land within the lead window, well
// before others could drop the entry (after the lease × (1+ρ)). Far from
// the head, a waiter so writes the queue half as often at the defaults
// (every 4s, not 2s), and so do the retries its writes cause.
func (l *Lock) beatEvery() time.Duration {
	cfg := l.Config()
	if f := l.fair; f.ahead >= 0 && f.ahead <= 2 {
		return cfg.RenewInterval
	}
	return max(cfg.RenewInterval, election.LeadWindow(cfg.LeaseDuration, cfg.MaxDrift, cfg.Margin)-2*cfg.OpTimeout-cfg.RetryMax)
}

// shutAt is when an open gate closes unless a heartbeat is confirmed
// meanwhile: the lease's lead window after the last confirmed one was sent.
func (l *Lock) shutAt() time.Time { return l.fair.shut }

// gateDue returns when the open gate must be looked at again; zero if it
// is not open.
func (l *Lock) gateDue() time.Time {
	if f := l.fair; f == nil || !f.open || f.gone || f.leaving {
		return time.Time{}
	}
	return l.shutAt()
}

// leaveQueue drops our entry: we got the lock, or gave up.
func (l *Lock) leaveQueue() {
	if f := l.fair; f != nil && !f.leaving && !f.gone {
		f.leaving = true
		if f.ticket == 0 {
			f.gone = true
			return
		}
		if !f.inFlight {
			f.next = l.h.Now()
		}
	}
}
