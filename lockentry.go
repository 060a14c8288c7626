package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
)

// lockEntry is one lock of a Locker: the lock's logic (lockcore.Lock) and
// the lockcore.Host that the Locker's loop carries out. Every field is the
// loop's.
type lockEntry struct {
	lockcore.Lock
	host.Slot
	l      *Locker
	cfg    *election.Config // until the lock starts
	result chan takeResult  // size 1: what TryLock or Lock returns; nil once sent
	held   *Lock
	next   *lockEntry   // the next call of this Locker waiting for the name
	flight *host.Flight // the call in flight on the lock's record

	// A semaphore (Slots): its calls, and the call on each slot's record.
	sem         *lockcore.Sem
	slots       int
	semCalls    map[*host.Flight]semCall
	slotFlights []*host.Flight

	try     bool
	fair    bool
	keep    bool // OncePer: the lock is never given back
	started bool
	counted bool // in Locker.held
	live    bool // started and not yet retired
}

type takeResult struct {
	lock *Lock
	err  error
}

// fail answers a waiting call with err, if it has no answer yet.
func (e *lockEntry) fail(err error) {
	if e.Answer() {
		e.answer(takeResult{err: err})
	}
}

// waitedFor is the error of a Lock whose ctx ended with err: a
// *LockedError naming the holder last seen, or, if none was, err with the
// last store error.
func (e *lockEntry) waitedFor(err error) error {
	var ld election.Leader
	switch {
	case !e.started: // waiting behind a call of this Locker
		if a := e.l.names[e.Name()]; a != nil && a.held != nil {
			ld = election.Leader{Holder: e.l.cfg.ID, Token: a.held.Token()}
		}
	case e.sem != nil:
		ls := e.sem.Holders()
		for _, h := range ls {
			if h.Holder != "" {
				return lockedBySlots(e.Name(), ls, err)
			}
		}
	default:
		ld = e.Leader()
	}
	if ld.Holder != "" {
		return &LockedError{Name: e.Name(), Leader: ld, Err: err}
	}
	if e.started {
		if serr := e.Err(); serr != nil {
			return fmt.Errorf("tenure: lock %q: %w (the store's last error: %v)", e.Name(), err, serr)
		}
	}
	return fmt.Errorf("tenure: lock %q: %w", e.Name(), err)
}

// stopEntry ends the lock: the term ends, then the release. A lock still
// waiting in this process just leaves the queue.
func (e *lockEntry) stopEntry() {
	if !e.started {
		e.l.dequeue(e)
		e.l.checkDrained()
		return
	}
	e.Stop()
}

// unlock stops the lock and answers done once it is released.
func (e *lockEntry) unlock(done chan error) {
	if !e.live {
		done <- nil // already gone: lost, or released
		return
	}
	e.l.unlocks[e] = append(e.l.unlocks[e], done)
	e.stopEntry()
}

var errUnlocked = errors.New("tenure: unlocked")

// The lockcore.Host of a lock.

func (e *lockEntry) Now() time.Time { return e.l.cfg.Clock.Now() }

func (e *lockEntry) Call(op election.Op, rec int) {
	if rec != lockcore.RecLock {
		e.l.h.Call(e, tagQueue, lockcore.RecordName(e.Name(), rec), op, e.Config().OpTimeout)
		return
	}
	e.flight = e.l.h.Call(e, tagLock, e.Name(), op, 0) // the Machine times it out
}

// Which record of the lock a call is on.
const (
	tagLock uint8 = iota
	tagQueue
)

// Cancel abandons the lock call in flight, or drops it unstarted.
func (e *lockEntry) Cancel() {
	e.l.h.Cancel(e.flight)
	e.flight = nil
}

// CallDone takes the outcome of one of the lock's calls.
func (e *lockEntry) CallDone(f *host.Flight, res election.Result) {
	if e.sem != nil {
		e.semDone(f, res)
		return
	}
	if f == e.flight {
		e.flight = nil // its context is done: let it go
	}
	switch {
	case !e.live:
	case f.Tag() == tagQueue:
		e.QueueResult(res, f.Op().Kind == election.OpPut)
	default:
		e.Result(res)
	}
}

// Due is the lock's next wake-up, none once it is retired.
func (e *lockEntry) Due() time.Time {
	if !e.live {
		return time.Time{}
	}
	return e.call().Due()
}

func (e *lockEntry) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelError {
		e.l.ms.anomaly()
	}
	e.l.log(level, msg, args...)
}

func (e *lockEntry) Granted(t election.Term) { e.grant(e.Name(), t) }

// grant answers the caller with the lock held for term t of the lease
// name (a semaphore's slot record, or the lock's).
func (e *lockEntry) grant(name string, t election.Term) {
	term := Term{Lease: name, Holder: e.l.cfg.ID, Token: t.Token, Deadline: t.Deadline, Payload: e.Config().Payload}
	e.held = &Lock{e: e}
	e.held.ctx.init(context.Background(), term, e.l.cfg.Clock)
	e.counted = true
	e.l.held.Add(1)
	e.l.ms.elected()
	e.answer(takeResult{lock: e.held})
	e.l.log(slog.LevelDebug, "locked", "lock", e.Name(), "token", term.Token)
}

func (e *lockEntry) Busy(ld election.Leader) {
	var err error = &LockedError{Name: e.Name(), Leader: ld}
	if e.keep {
		err = slotTakenError{err.(*LockedError)}
	}
	e.answer(takeResult{err: err})
}

func (e *lockEntry) Refused(err error) { e.answer(takeResult{err: err}) }

// answer sends the one answer, and lets go of the channel that the
// caller alone holds now.
func (e *lockEntry) answer(r takeResult) {
	e.result <- r
	e.result = nil
}

func (e *lockEntry) Publish(s driver.Snapshot) {
	if e.held != nil {
		followJeopardy(&e.held.ctx, e.l.cfg.Clock.Now(), s, e.l.ms, e.l.log, "lock", e.Name())
		e.held.ctx.announce()
	}
}

func (e *lockEntry) Ended(t election.Term, r election.Reason) {
	e.uncount()
	e.l.ms.demoted(DemotionReason(r))
	if e.held != nil {
		followJeopardy(&e.held.ctx, e.l.cfg.Clock.Now(), driver.Snapshot{}, e.l.ms, e.l.log, "lock", e.Name()) // over with the term
		e.held.ctx.announce()
		e.held.ctx.cancel(fmt.Errorf("tenure: lock %q (token %d) ended: %s", e.Name(), t.Token, DemotionReason(r)))
	}
	if r != election.ReasonShutDown {
		e.l.log(slog.LevelWarn, "lock lost", "lock", e.Name(), "token", t.Token, "reason", DemotionReason(r).String())
	}
}

func (e *lockEntry) Reschedule() { e.l.h.Fix(e) }

func (e *lockEntry) WakeNext(addr string) { e.l.wakes.send(addr, wakeMsg(e.Name())) }

// uncount takes the lock out of tenure.locks.held.
func (e *lockEntry) uncount() {
	if e.counted {
		e.counted = false
		e.l.held.Add(-1)
	}
}

func (e *lockEntry) Retired() {
	e.uncount()
	var err error
	if e.GaveUp() {
		cause := e.Err()
		if cause == nil {
			cause = errors.New("no answer from the store")
		}
		err = fmt.Errorf("%w: lock %q within %v: %w", ErrReleaseUnconfirmed, e.Name(), e.Config().ReleaseTimeout, cause)
	}
	for _, u := range e.l.unlocks[e] {
		u <- err
	}
	delete(e.l.unlocks, e)
	if e.held != nil {
		e.held.ctx.cancel(errUnlocked)
	}
	e.fail(ErrClosed) // a call still waiting: the Locker is closing
	e.l.remove(e)
}
