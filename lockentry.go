package tenure

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
)

// lockEntry is one lock of a Locker: its Machine and driver, with the
// driver.Effects that the Locker's loop carries out. Every field is the
// loop's.
type lockEntry struct {
	l    *Locker
	name string
	ec   election.Config
	m    *election.Machine
	d    *driver.Driver
	try  bool // TryLock: give up at the first sight of a holder

	result  chan takeResult // size 1: what TryLock or Lock returns
	replied bool
	held    *Lock
	unlocks []chan error // Unlock calls waiting for the release

	wake, giveUp time.Time // the driver's wake-up and release timer
	idx          int       // in the Locker's heap, or -1

	opID     uint64
	cancelOp context.CancelFunc
	stopping bool // stop the driver once its current step is over
	lost     bool // the term ended: give the lock up

	fair *fairState // Fair: the lock's queue; nil otherwise
}

type takeResult struct {
	lock *Lock
	err  error
}

// reply answers the TryLock or Lock call, once.
func (e *lockEntry) reply(r takeResult) {
	if !e.replied {
		e.replied = true
		e.result <- r
	}
}

// fail answers a waiting call with err.
func (e *lockEntry) fail(err error) { e.reply(takeResult{err: err}) }

// stopDriver ends the lock: Stop (the term ends), then the release. A lock
// still waiting in this process just leaves the queue.
func (e *lockEntry) stopDriver() {
	if e.d == nil {
		e.l.dequeue(e)
		e.l.checkDrained()
		return
	}
	e.d.Stop()
	e.after()
}

// unlock stops the lock and answers done once it is released.
func (e *lockEntry) unlock(done chan error) {
	if _, ok := e.l.entries[e]; !ok {
		done <- nil // already gone: lost, or released
		return
	}
	e.unlocks = append(e.unlocks, done)
	e.stopDriver()
}

// after runs once a driver call has returned: it carries out what the
// effects deferred, and retires the lock when its driver is done.
func (e *lockEntry) after() {
	if (e.stopping || e.lost) && !e.d.Stopping() {
		e.stopping = false
		e.d.Stop()
	}
	if !e.d.Done() {
		e.reschedule()
		return
	}
	if f := e.fair; f != nil && !f.gone {
		e.leaveQueue() // the lock is over: drop our entry, then retire
		e.reschedule()
		return
	}
	var err error
	if e.d.GaveUp() {
		cause := e.m.Err()
		if cause == nil {
			cause = errors.New("no answer from the store")
		}
		err = fmt.Errorf("%w: lock %q within %v: %w", ErrReleaseUnconfirmed, e.name, e.ec.ReleaseTimeout, cause)
	}
	for _, u := range e.unlocks {
		u <- err
	}
	e.unlocks = nil
	if e.held != nil {
		e.held.ctx.cancel(errUnlocked)
	}
	e.fail(ErrClosed) // a call still waiting: the Locker is closing
	e.l.remove(e)
}

var errUnlocked = errors.New("tenure: unlocked")

// The lock's place in the Locker's heap of wake-ups.

func (e *lockEntry) due() time.Time {
	var d time.Time
	for _, t := range []time.Time{e.wake, e.giveUp, e.queueNext()} {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

func (e *lockEntry) queueNext() time.Time {
	if e.fair == nil {
		return time.Time{}
	}
	return e.fair.next
}

func (e *lockEntry) reschedule() {
	h := &e.l.wakes
	switch {
	case e.due().IsZero() && e.idx >= 0:
		heap.Remove(h, e.idx)
	case e.due().IsZero():
	case e.idx >= 0:
		heap.Fix(h, e.idx)
	default:
		heap.Push(h, e)
	}
}

// fireDue runs whichever of the lock's timers is due.
func (e *lockEntry) fireDue(now time.Time) {
	if q := e.queueNext(); !q.IsZero() && !now.Before(q) {
		e.queueStep()
	} else if !e.giveUp.IsZero() && !now.Before(e.giveUp) {
		e.giveUp = time.Time{}
		e.d.GiveUp()
	} else {
		e.wake = time.Time{}
		e.d.Tick()
	}
	e.after()
}

// The driver.Effects of a lock.

func (e *lockEntry) Now() time.Time { return e.l.cfg.Clock.Now() }

func (e *lockEntry) Send(op election.Op) {
	l := e.l
	ctx, cancel := context.WithCancel(l.base)
	e.opID, e.cancelOp = op.ID, cancel
	rec := op.Record
	rec.WrittenAt = l.cfg.Clock.Now().Round(0).UTC()
	l.wg.Go(func() {
		defer cancel()
		res := election.Result{ID: op.ID}
		switch op.Kind {
		case election.OpGet:
			res.Record, res.Version, res.Err = l.cfg.Store.Get(ctx, e.name)
		case election.OpPut:
			res.Version, res.Err = l.cfg.Store.Put(ctx, e.name, rec, op.Expect)
		}
		select {
		case l.res <- lockResult{e: e, res: res}:
		case <-l.quit:
		}
	})
}

func (e *lockEntry) Cancel(uint64) { e.cancelOp() }

func (e *lockEntry) Wake(at time.Time) { e.wake = at }

func (e *lockEntry) ReleaseTimer(d time.Duration) { e.giveUp = e.Now().Add(d) }

func (e *lockEntry) Publish(s driver.Snapshot) {
	if s.Leading && e.held != nil {
		e.held.ctx.setDeadline(s.Term.Deadline)
	}
	if e.try && !e.replied && s.Err != nil && !s.Leading {
		e.fail(fmt.Errorf("tenure: lock %q: %w", e.name, s.Err)) // TryLock does not wait out a failing store
		e.stopping = true
	}
}

func (e *lockEntry) Elected(t election.Term) {
	f := fencing.Fence{Lease: e.name, Token: fencing.Token(t.Token)}
	term := Term{Lease: e.name, Holder: e.ec.ID, Token: f.Token, Deadline: t.Deadline, Payload: e.ec.Payload}
	h := &Lock{name: e.name, token: f.Token, ctx: newTermContext(context.Background(), term, e.l.cfg.Clock), e: e, l: e.l}
	e.held = h
	e.leaveQueue()
	if e.replied { // the caller gave up meanwhile: give it back
		e.stopping = true
		return
	}
	e.reply(takeResult{lock: h})
	e.l.log(slog.LevelDebug, "locked", "lock", e.name, "token", f.Token)
}

func (e *lockEntry) Demoted(t election.Term, r election.Reason) {
	if e.held != nil {
		e.held.ctx.cancel(fmt.Errorf("tenure: lock %q (token %d) ended: %s", e.name, t.Token, DemotionReason(r)))
	}
	if r != election.ReasonShutDown {
		e.l.log(slog.LevelWarn, "lock lost", "lock", e.name, "token", t.Token, "reason", DemotionReason(r).String())
	}
	e.lost = true // a lock is not taken again by itself
}

// LeaderChanged: for TryLock, any holder but this lock itself refuses it,
// this Locker's ID included (a record left by an earlier process with it).
func (e *lockEntry) LeaderChanged(l election.Leader) {
	if e.try && !e.replied && l.Holder != "" && e.held == nil {
		e.reply(takeResult{err: &LockedError{Name: e.name, Holder: l.Holder, Token: fencing.Token(l.Token), Payload: l.Payload}})
		e.stopping = true
	}
}

func (e *lockEntry) Anomaly(err error) {
	e.l.log(slog.LevelError, "lease anomaly", "lock", e.name, "err", err)
}

// Barrier: locks have no callbacks, so every barrier is reached at once.
func (e *lockEntry) Barrier(b driver.Barrier) { e.d.Reached(b) }

// wakeHeap orders locks by their next wake-up.
type wakeHeap []*lockEntry

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].due().Before(h[j].due()) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *wakeHeap) Push(x any) {
	e := x.(*lockEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *wakeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}
