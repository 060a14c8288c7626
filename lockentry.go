package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
)

// lockCall is what a Locker keeps of one TryLock or Lock call beside its
// engine.Entry (Entry.Owner): the caller's answer, and the lock held.
// Every field is the loop's.
type lockCall struct {
	result  chan takeResult // size 1: what TryLock or Lock returns; nil once sent
	held    *Lock
	counted bool // in Locker.held
}

type takeResult struct {
	lock *Lock
	err  error
}

func callOf(e *engine.Entry) *lockCall { return e.Owner.(*lockCall) }

// waitedFor is the error of a Lock whose ctx ended with err: a
// *LockedError naming the holder last seen, or, if none was, err with the
// last store error.
func (l *Locker) waitedFor(e *engine.Entry, err error) error {
	var ld election.Leader
	switch {
	case !e.Started(): // waiting behind a call of this Locker
		if a := l.lk.Active(e.Name()); a != nil {
			if t, ok := a.Held(); ok {
				ld = election.Leader{Holder: l.cfg.ID, Token: t.Token}
			}
		}
	case e.Sem() != nil:
		ls := e.Sem().Holders()
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
	if e.Started() {
		if serr := e.Err(); serr != nil {
			return fmt.Errorf("tenure: lock %q: %w (the store's last error: %v)", e.Name(), err, serr)
		}
	}
	return fmt.Errorf("tenure: lock %q: %w", e.Name(), err)
}

// stop ends e: the term, then the release (engine.Locker.Stop).
func (l *Locker) stop(e *engine.Entry) {
	l.lk.Stop(e)
	l.checkDrained()
}

// unlock stops e and answers done once it is released.
func (l *Locker) unlock(e *engine.Entry, done chan error) {
	if !e.Live() {
		done <- nil // already gone: lost, or released
		return
	}
	l.unlocks[e] = append(l.unlocks[e], done)
	l.stop(e)
}

var errUnlocked = errors.New("tenure: unlocked")

// lockerFx is a Locker's engine.LockerEffects: its entries' answers go to
// their callers, their terms to the Locks' contexts, their events to the
// metrics and the log.
type lockerFx Locker

func (f *lockerFx) l() *Locker { return (*Locker)(f) }

func (f *lockerFx) Now() time.Time { return f.cfg.Clock.Now() }

func (f *lockerFx) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelError {
		f.ms.Anomaly()
	}
	f.l().log(level, msg, args...)
}

// Granted answers the caller with the lock held for term t of the record
// name (a semaphore's slot record, or the lock's).
func (f *lockerFx) Granted(e *engine.Entry, name string, t election.Term) {
	c := callOf(e)
	t.Lease, t.Holder, t.Payload = name, f.cfg.ID, e.Config().Payload
	c.held = &Lock{e: e, l: f.l()}
	c.held.ctx.Init(context.Background(), t, f.cfg.Clock)
	c.counted = true
	f.held.Add(1)
	f.ms.Elected()
	c.answer(takeResult{lock: c.held})
	f.l().log(slog.LevelDebug, "locked", "lock", e.Name(), "token", t.Token)
}

func (f *lockerFx) Busy(e *engine.Entry, ld election.Leader, slots []election.Leader) {
	var err error
	if slots != nil {
		err = lockedBySlots(e.Name(), slots, nil)
	} else {
		le := &LockedError{Name: e.Name(), Leader: ld}
		err = le
		if e.Keeps() {
			err = slotTakenError{le}
		}
	}
	callOf(e).answer(takeResult{err: err})
}

func (f *lockerFx) Refused(e *engine.Entry, err error) { callOf(e).answer(takeResult{err: err}) }

// answer sends the one answer, and lets go of the channel that the
// caller alone holds now.
func (c *lockCall) answer(r takeResult) {
	c.result <- r
	c.result = nil
}

func (f *lockerFx) Published(e *engine.Entry, s driver.Snapshot) {
	if h := callOf(e).held; h != nil {
		engine.FollowJeopardy(&h.ctx, f.cfg.Clock.Now(), s, f.ms, f.l().log, "lock", e.Name())
		h.ctx.Announce()
	}
}

func (f *lockerFx) Ended(e *engine.Entry, t election.Term, r election.Reason) {
	c := callOf(e)
	f.uncount(c)
	f.ms.Demoted(r)
	if h := c.held; h != nil {
		engine.FollowJeopardy(&h.ctx, f.cfg.Clock.Now(), driver.Snapshot{}, f.ms, f.l().log, "lock", e.Name()) // over with the term
		h.ctx.Announce()
		h.ctx.Cancel(fmt.Errorf("tenure: lock %q (token %d) ended: %s", e.Name(), t.Token, r))
	}
	if r != election.ReasonShutDown {
		f.l().log(slog.LevelWarn, "lock lost", "lock", e.Name(), "token", t.Token, "reason", r.String())
	}
}

func (f *lockerFx) WakeNext(name, addr string) { f.wakes.send(addr, wakeMsg(name)) }

// uncount takes the lock out of tenure.locks.held.
func (f *lockerFx) uncount(c *lockCall) {
	if c.counted {
		c.counted = false
		f.held.Add(-1)
	}
}

func (f *lockerFx) Retired(e *engine.Entry) {
	c := callOf(e)
	f.uncount(c)
	var err error
	if e.GaveUp() {
		cause := e.Err()
		if cause == nil {
			cause = errors.New("no answer from the store")
		}
		err = fmt.Errorf("%w: lock %q within %v: %w", ErrReleaseUnconfirmed, e.Name(), e.Config().ReleaseTimeout, cause)
	}
	for _, u := range f.unlocks[e] {
		u <- err
	}
	delete(f.unlocks, e)
	if c.held != nil {
		c.held.ctx.Cancel(errUnlocked)
	}
	f.lk.Fail(e, ErrClosed) // a call still waiting: the Locker is closing
	f.l().checkDrained()
}
