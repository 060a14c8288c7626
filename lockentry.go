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
	"github.com/tenure-go/tenure/internal/lockcore"
)

// lockEntry is one lock of a Locker: the lock's logic (lockcore.Lock) and
// the lockcore.Host that the Locker's loop carries out. Every field is the
// loop's.
type lockEntry struct {
	lockcore.Lock
	l      *Locker
	cfg    *election.Config // until the lock starts
	result chan takeResult  // size 1: what TryLock or Lock returns; nil once sent
	held   *Lock
	idx    int        // in the Locker's heap, or -1
	next   *lockEntry // the next call of this Locker waiting for the name

	opID     uint64             // the lock call asked for; 0 once answered or cancelled
	cancelOp context.CancelFunc // cancels it once started

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
			ld = election.Leader{Holder: e.l.cfg.ID, Token: uint64(a.held.Token())}
		}
	default:
		ld = e.Leader()
	}
	if ld.Holder != "" {
		return &LockedError{Name: e.Name(), Holder: ld.Holder, Token: fencing.Token(ld.Token), Payload: ld.Payload, Err: err}
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

func (e *lockEntry) Call(op election.Op, queue bool) {
	op.Record.WrittenAt = e.l.cfg.Clock.Now().Round(0).UTC()
	if !queue {
		e.opID = op.ID
	}
	e.l.call(storeCall{e: e, op: op, queue: queue})
}

// start runs a store call on a goroutine of its own, which hands the
// answer to the loop.
func (e *lockEntry) start(op election.Op, queue bool) {
	l := e.l
	var ctx context.Context
	var cancel context.CancelFunc
	name := e.Name()
	if queue {
		name += lockcore.QueueSuffix
		ctx, cancel = context.WithTimeout(l.base, e.Config().OpTimeout)
	} else {
		ctx, cancel = context.WithCancel(l.base) // the Machine times it out
		e.cancelOp = cancel
	}
	l.wg.Go(func() {
		defer cancel()
		res := election.Result{ID: op.ID, Record: op.Record}
		start := l.cfg.Clock.Now()
		switch op.Kind {
		case election.OpGet:
			res.Record, res.Version, res.Err = l.cfg.Store.Get(ctx, name)
		case election.OpPut:
			res.Version, res.Err = l.cfg.Store.Put(ctx, name, op.Record, op.Expect)
		}
		l.ms.storeCall(opName(op.Kind), res.Err, l.cfg.Clock.Now().Sub(start))
		l.answered.note(l.cfg.Clock, res.Err)
		select {
		case l.res <- lockResult{e: e, res: res, queue: queue, put: op.Kind == election.OpPut}:
		case <-l.quit:
		}
	})
}

// Cancel abandons the lock call in flight, or drops it unstarted.
func (e *lockEntry) Cancel() {
	e.opID = 0
	if e.cancelOp != nil {
		e.cancelOp()
		e.cancelOp = nil
	}
}

func (e *lockEntry) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelError {
		e.l.ms.anomaly()
	}
	e.l.log(level, msg, args...)
}

func (e *lockEntry) Granted(t election.Term) {
	term := Term{Lease: e.Name(), Holder: e.l.cfg.ID, Token: fencing.Token(t.Token), Deadline: t.Deadline, Payload: e.Config().Payload}
	e.held = &Lock{e: e}
	e.held.ctx.init(context.Background(), term, e.l.cfg.Clock)
	e.counted = true
	e.l.held.Add(1)
	e.l.ms.elected()
	e.answer(takeResult{lock: e.held})
	e.l.log(slog.LevelDebug, "locked", "lock", e.Name(), "token", term.Token)
}

func (e *lockEntry) Busy(ld election.Leader) {
	var err error = &LockedError{Name: e.Name(), Holder: ld.Holder, Token: fencing.Token(ld.Token), Payload: ld.Payload}
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

func (e *lockEntry) Extended(deadline time.Time) {
	if e.held != nil {
		e.held.ctx.setDeadline(deadline)
	}
}

func (e *lockEntry) Ended(t election.Term, r election.Reason) {
	e.uncount()
	e.l.ms.demoted(DemotionReason(r))
	if e.held != nil {
		e.held.ctx.cancel(fmt.Errorf("tenure: lock %q (token %d) ended: %s", e.Name(), t.Token, DemotionReason(r)))
	}
	if r != election.ReasonShutDown {
		e.l.log(slog.LevelWarn, "lock lost", "lock", e.Name(), "token", t.Token, "reason", DemotionReason(r).String())
	}
}

func (e *lockEntry) Reschedule() {
	h := &e.l.wakes
	due := e.Due()
	switch {
	case due.IsZero() && e.idx >= 0:
		heap.Remove(h, e.idx)
	case due.IsZero():
	case e.idx >= 0:
		heap.Fix(h, e.idx)
	default:
		heap.Push(h, e)
	}
}

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

// wakeHeap orders locks by their next wake-up.
type wakeHeap []*lockEntry

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].Due().Before(h[j].Due()) }
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
