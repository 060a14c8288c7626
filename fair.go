package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// Fair waiting. A fair waiter takes a ticket in the lock's queue, a record
// of its own named NAME::queue in the same store (a counter of tickets and
// the list of waiting tickets with a heartbeat count each), keeps its entry
// alive by counting up its heartbeat every RenewInterval, and may campaign
// for the lock only while its ticket is the oldest live one. An entry whose
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

// queueSuffix names a lock's queue record; lock names may not contain "::".
const queueSuffix = "::queue"

// maxWaiters bounds a queue: its record's payload holds every entry.
const maxWaiters = 64

// Fair makes Lock wait in first-come order among fair waiters.
func Fair() LockOption { return func(o *lockOptions) { o.fair = true } }

// ErrQueueFull is returned by a fair Lock when its queue already holds the
// most waiters a queue record can (64).
var ErrQueueFull = errors.New("tenure: the lock's queue is full")

type qentry struct{ ticket, beat uint64 }

func parseQueue(b []byte) ([]qentry, error) {
	var q []qentry
	for _, f := range strings.Fields(string(b)) {
		t, beat, ok := strings.Cut(f, ".")
		tv, err1 := strconv.ParseUint(t, 10, 64)
		bv, err2 := strconv.ParseUint(beat, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("queue entry %q is not TICKET.BEAT", f)
		}
		q = append(q, qentry{tv, bv})
	}
	return q, nil
}

func formatQueue(q []qentry) []byte {
	var b []byte
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
	rec      lease.Record
	ver      lease.Version
	found    bool
	known    bool // rec, ver and found are what the store held at our last call
	seen     map[uint64]seenBeat
	inFlight bool
	next     time.Time // next queue action; zero: none
	leaving  bool      // drop our entry (we got the lock, or gave up)
	removing bool      // the write in flight drops our entry
	gone     bool      // our entry is out of the queue for good
	open     bool      // the gate is open: our turn
}

type seenBeat struct {
	beat  uint64
	since time.Time
}

// queueStep runs the queue action that is due: read, or write our change.
func (e *lockEntry) queueStep() {
	f := e.fair
	f.next = time.Time{}
	if f.inFlight || f.gone {
		return
	}
	if !f.known {
		e.queueCall(election.Op{Kind: election.OpGet})
		return
	}
	q, err := parseQueue(f.rec.Payload)
	if err != nil || f.found && f.rec.Holder != queueHolder {
		e.l.log(slog.LevelError, "lock queue unreadable; waiting without it", "lock", e.name, "err", err)
		f.gone, f.open = true, true
		e.d.Gate(false)
		return
	}
	now := e.Now()
	live := q[:0]
	mine := false
	for _, qe := range q {
		switch {
		case qe.ticket == f.ticket && f.leaving:
		case qe.ticket == f.ticket:
			qe.beat++
			mine = true
			live = append(live, qe)
		case e.abandoned(qe, now):
		default:
			live = append(live, qe)
		}
	}
	next := f.rec.Token
	if !f.found {
		next = 1
	}
	switch {
	case f.leaving && !mine && f.ticket != 0 && len(live) == len(q):
		f.gone = true // nothing of ours to drop
		return
	case !f.leaving && (f.ticket == 0 || !mine):
		// Take a ticket (again, if our entry was dropped as abandoned).
		if len(live) >= maxWaiters {
			e.fail(ErrQueueFull)
			f.gone = true
			e.stopping = true
			return
		}
		f.ticket = next
		next++
		live = append(live, qentry{f.ticket, 0})
	}
	f.removing = f.leaving
	rec := lease.Record{Holder: queueHolder, Token: max(next, 1), Duration: e.ec.LeaseDuration,
		Nonce: strconv.FormatUint(e.ec.Rand.Uint64(), 16), Payload: formatQueue(live)}
	expect := f.ver
	if !f.found {
		expect = lease.NoVersion
	}
	e.queueCall(election.Op{Kind: election.OpPut, Record: rec, Expect: expect})
}

// queueHolder is the holder of every queue record.
const queueHolder = "tenure-queue"

// abandoned reports whether this waiter saw qe's heartbeat unchanged for
// the lock's lease × (1+ρ) on its own clock; it notes every new beat.
func (e *lockEntry) abandoned(qe qentry, now time.Time) bool {
	f := e.fair
	s, ok := f.seen[qe.ticket]
	if !ok || s.beat != qe.beat {
		f.seen[qe.ticket] = seenBeat{qe.beat, now}
		return false
	}
	return now.Sub(s.since) >= election.WaitBeforeTakeover(e.ec.LeaseDuration, e.ec.MaxDrift)
}

// queueCall sends a call on the queue record.
func (e *lockEntry) queueCall(op election.Op) {
	l := e.l
	e.fair.inFlight = true
	name := e.name + queueSuffix
	l.wg.Go(func() {
		ctx, cancel := context.WithTimeout(l.base, e.ec.OpTimeout)
		defer cancel()
		res := election.Result{Record: op.Record}
		if op.Kind == election.OpGet {
			res.Record, res.Version, res.Err = l.cfg.Store.Get(ctx, name)
		} else {
			res.Version, res.Err = l.cfg.Store.Put(ctx, name, op.Record, op.Expect)
		}
		select {
		case l.res <- lockResult{e: e, res: res, queue: true, put: op.Kind == election.OpPut}:
		case <-l.quit:
		}
	})
}

// queueResult takes the answer of a queue call and decides the gate.
func (e *lockEntry) queueResult(r lockResult) {
	f := e.fair
	f.inFlight = false
	now := e.Now()
	var ce *lease.ConflictError
	switch {
	case r.res.Err == nil && r.put:
		f.rec, f.ver, f.found, f.known = r.res.Record, r.res.Version, true, true
		switch {
		case f.removing:
			f.gone = true
			return
		case f.leaving: // a heartbeat landed after we decided to leave
			f.next = now
			return
		}
		f.next = now.Add(e.ec.RenewInterval)
	case r.res.Err == nil:
		f.rec, f.ver, f.found, f.known = r.res.Record, r.res.Version, true, true
		f.next = now
	case errors.Is(r.res.Err, lease.ErrNotFound):
		f.rec, f.ver, f.found, f.known = lease.Record{}, lease.NoVersion, false, true
		f.next = now
	case errors.As(r.res.Err, &ce):
		f.rec, f.ver, f.found, f.known = ce.Current, ce.Version, ce.Found, true
		f.next = now // try our change again on what is there
	case errors.Is(r.res.Err, lease.ErrConflict):
		f.known = false
		f.next = now
	default:
		if f.leaving { // best effort: others skip an abandoned entry anyway
			f.gone = true
			return
		}
		f.known = false
		f.next = now.Add(e.ec.RetryMax)
		return
	}
	e.gate(now)
}

// gate opens the lock's gate while our ticket is the oldest live one.
func (e *lockEntry) gate(now time.Time) {
	f := e.fair
	if f.gone || f.leaving || !f.known || f.ticket == 0 {
		return
	}
	q, _ := parseQueue(f.rec.Payload)
	head := uint64(0)
	for _, qe := range q {
		if qe.ticket == f.ticket || !e.abandoned(qe, now) {
			head = qe.ticket
			break
		}
	}
	if open := head == f.ticket; open != f.open {
		f.open = open
		e.d.Gate(!open)
	}
}

// leaveQueue drops our entry: we got the lock, or gave up.
func (e *lockEntry) leaveQueue() {
	if f := e.fair; f != nil && !f.leaving && !f.gone {
		f.leaving = true
		if f.ticket == 0 {
			f.gone = true
			return
		}
		if !f.inFlight {
			f.next = e.Now()
		}
	}
}
