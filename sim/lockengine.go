package sim

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
)

// engineAnswered notes, before the entry has it, a failed call that may
// cost a fair waiter its place, and keeps the ticket after it.
func (l *lockClient) engineAnswered(f *host.Flight, res election.Result, timedOut bool) {
	if failedCall(f, res, timedOut) {
		l.failed = true
	}
	if e := l.entry; e != nil {
		defer func() {
			if l.entry != e {
				return
			}
			var t uint64
			if s := e.Sem(); s != nil {
				t = s.Ticket()
			} else {
				t = e.Lock.Ticket()
			}
			if t != 0 {
				l.ticket = t
			}
		}()
	}
}

// woken takes a wake-up for lock: the current call's lock reads sooner if
// it waits for it, within the rate limit.
func (l *lockClient) woken(lock string) {
	e := l.entry
	if l.dead || e == nil || lock != l.name || e.Sem() != nil {
		return
	}
	turn := e.Turn()
	if l.lkr.Woken(lock) {
		l.tookWake(e, turn)
	}
	l.arm()
}

// tookWake: e's lock reads now, for a wake-up. Where the lock is free in
// the store as the wake-up arrives over a clean network, and it was the
// waiter's turn (a fair one at the head of its queue), someone must be
// granted the lock within the lock handoff bound (I5).
func (l *lockClient) tookWake(e *engine.Entry, turn bool) {
	l.w.chk.stats.WakesUsed++
	l.trace("woken: reading " + l.name)
	if wf := l.w.plan.Wake; wf != nil && *wf == (wakeFaults{}) && l.reg.rec.Released && turn {
		l.w.chk.lockHandoff(l, &e.Lock, l.w.lockHandoffBound())
	}
}

// lockFx is a lock client's engine.LockerEffects: the program's side of
// its calls, and the checker's view of them.
type lockFx lockClient

func (f *lockFx) l() *lockClient { return (*lockClient)(f) }

func (f *lockFx) Now() time.Time { return f.l().now() }

func (f *lockFx) Log(slog.Level, string, ...any) {}

func (f *lockFx) Granted(e *engine.Entry, name string, t election.Term) {
	l := f.l()
	l.held = name
	l.jeopardy = false
	l.answered("granted, token " + strconv.FormatUint(uint64(t.Token), 10))
	if l.w.opt.Strategy == Naive {
		t.Deadline = time.Time{} // nothing to check it by
	}
	l.w.chk.granted(l, t)
	if l.real != nil {
		return // the program holds the lock as tenure.Locker's caller
	}
	lp := l.w.plan.Locks
	l.after(uniform(l.rng, lp.Hold[0], lp.Hold[1]), func() {
		if l.entry == e && !l.in.stopped { // stopped: given back already
			if e.Sem() != nil {
				l.trace("unlock " + l.held)
			} else {
				l.trace("unlock " + l.name)
			}
			l.lkr.Stop(e)
		}
		l.arm()
	})
}

func (f *lockFx) Busy(_ *engine.Entry, ld election.Leader, slots []election.Leader) {
	l := f.l()
	if slots == nil {
		l.answered("locked by " + ld.Holder + " (token " + strconv.FormatUint(uint64(ld.Token), 10) + ")")
		return
	}
	msg := "all slots held:"
	for _, h := range slots {
		msg += " " + h.Holder + "/" + strconv.FormatUint(uint64(h.Token), 10)
	}
	l.answered(msg)
}

func (f *lockFx) Refused(_ *engine.Entry, err error) {
	l := f.l()
	switch {
	case l.real == nil:
	case l.in.stopped: // the real Locker's caller gives up (stop)
		l.answered("shut down")
		return
	case l.real.gaveUp():
		l.answered("gave up")
		return
	}
	l.answered("refused: " + err.Error())
}

func (f *lockFx) Published(_ *engine.Entry, s driver.Snapshot) { f.l().Publish(s) }

func (f *lockFx) Ended(_ *engine.Entry, t election.Term, r election.Reason) {
	l := f.l()
	if (r == election.ReasonStoreUnavailable || r == election.ReasonExpired) && !l.jeopardy && !l.pausedSinceCall() && l.w.opt.Strategy != Naive {
		l.w.chk.violate(Callbacks, l.in, fmt.Sprintf("%s's hold of %s (token %d) ended for want of renewals (%s) and was never reported in jeopardy", l.in.label, l.held, t.Token, r))
	}
	l.jeopardy = false
	l.trace(l.held + " ended: " + r.String())
	l.w.chk.released(l.in)
}

func (f *lockFx) Retired(*engine.Entry) {
	l := f.l()
	l.trace(l.name + " over")
	l.w.chk.released(l.in)
	l.entry = nil
	if l.real != nil {
		l.real.over()
		return
	}
	if l.in.stopped {
		l.finish()
		return
	}
	l.think()
}

func (f *lockFx) WakeNext(name, addr string) {
	l := f.l()
	l.trace("wake " + addr + " for " + name)
	if l.real == nil { // the real Locker's sender sends it (srcSend)
		l.w.stage(item{in: l.in, src: srcSend, kind: itWake, s: addr, msg: wakePrefix + name})
	}
}

// curLock returns the current call's lock, or nil (none, or a
// semaphore's).
func (l *lockClient) curLock() *lockcore.Lock {
	if e := l.entry; e != nil && e.Sem() == nil {
		return &e.Lock
	}
	return nil
}

// curSem returns the current call's semaphore, or nil.
func (l *lockClient) curSem() *lockcore.Sem {
	if e := l.entry; e != nil {
		return e.Sem()
	}
	return nil
}
