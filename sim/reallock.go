package sim

import (
	"context"
	"fmt"
	"net"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
)

// realLocker is a lock client of the real tier: the lock client's program
// (think, call, hold, unlock) on a goroutine of its own, calling
// tenure.Locker as its users do. Its entries' events reach the lock client
// through the engine's tap (lockTap), on the Locker's loop, where the
// fast tier has them from the entries it steps: the same traces, and the
// same checks.
type realLocker struct {
	realProc
	l    *lockClient
	lkr  *tenure.Locker
	done chan struct{} // the current call retired (size 1)
	gave bool          // the current call's context ended at its deadline (guarded by world.mu)
}

func newRealLocker(p realProc) *realLocker {
	r := &realLocker{realProc: p, done: make(chan struct{}, 1)}
	r.l = &lockClient{in: p.in, w: p.in.w, rng: lockRand(p.in), real: r}
	return r
}

func (r *realLocker) client() *lockClient { return r.l }

func (r *realLocker) over() {
	select {
	case r.done <- struct{}{}:
	default:
	}
}

func (r *realLocker) gaveUp() bool { return r.gave }

// TapLocker: the store hands the Locker the lock client's tap.
func (s realStore) TapLocker() engine.LockerTap {
	return lockTap{s.in.rt.(*realLocker)}
}

func (r *realLocker) start() {
	in := r.in
	w := in.w
	cfg := tenure.LockerConfig{
		Store: w.storeOf(in), Timing: in.timing,
		Runtime:     tenure.Runtime{ID: in.ID, Clock: realClock{in, srcRunner}, Rand: w.machineRand(in)},
		StrongPolls: !w.plan.StaleReads,
	}
	if w.plan.Wake != nil {
		cfg.WakeAddr = net.JoinHostPort(in.ID, "1") // simNet publishes the ID, as the fast tier does
	}
	lkr, err := tenure.NewLocker(cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: %s: %v", in.label, err))
	}
	r.lkr = lkr
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.run(ctx) // owned by the world: it waits for every instance's itRunDone
}

// run is the program: think, call, hold, unlock, until stopped; then it
// closes the Locker and Run's end is staged.
func (r *realLocker) run(ctx context.Context) {
	in, w, l := r.in, r.in.w, r.l
	lp := w.plan.Locks
	clk := realClock{in, srcCallbacks}
	defer func() {
		_ = r.lkr.Close()
		w.stage(item{in: in, src: srcRun, kind: itRunDone})
	}()
	for {
		w.mu.Lock()
		think := uniform(l.rng, lp.Think[0], lp.Think[1])
		w.mu.Unlock()
		select {
		case <-clk.After(think):
		case <-ctx.Done():
			return
		}
		w.mu.Lock()
		if w.ending { // the shutdown's stop comes
			w.mu.Unlock()
			<-ctx.Done()
			return
		}
		wait, slots := l.draw()
		r.gave = false
		name, try, fair := l.name, l.try, l.fair
		w.mu.Unlock()

		deadline := clk.After(wait)
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-deadline:
				w.mu.Lock()
				r.gave = true
				w.mu.Unlock()
				cancel()
			case <-cctx.Done():
			}
		}()
		var opts []tenure.LockOption
		if fair {
			opts = append(opts, tenure.Fair())
		}
		if slots > 0 {
			opts = append(opts, tenure.Slots(slots))
		}
		take := r.lkr.Lock
		if try {
			take = r.lkr.TryLock
		}
		lk, err := take(cctx, name, opts...)
		cancel()
		if err == nil {
			w.mu.Lock()
			hold := uniform(l.rng, lp.Hold[0], lp.Hold[1])
			w.mu.Unlock()
			select {
			case <-clk.After(hold):
				w.mu.Lock()
				if l.curSem() != nil {
					l.trace("unlock " + l.held)
				} else {
					l.trace("unlock " + l.name)
				}
				w.mu.Unlock()
				_ = lk.Unlock(context.Background())
			case <-r.done: // lost
				continue
			case <-ctx.Done():
				if r.crashed() {
					return
				}
				_ = lk.Unlock(context.Background())
			}
		}
		select {
		case <-r.done:
		case <-r.gone:
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (r *realLocker) crashed() bool {
	select {
	case <-r.gone:
		return true
	default:
		return false
	}
}

// crash: the checker sees the lock client dead, as on the fast tier.
func (r *realLocker) crash() {
	r.in.w.mu.Lock()
	r.l.dead = true
	r.in.w.mu.Unlock()
	r.realProc.crash()
}

// lockTap is the engine's tap on a real Locker: what the Locker's entries
// do, told to the lock client under the world's lock, as the fast tier
// tells it what the entries it steps do (lockFx). A dead process's
// goroutines wind down unseen.
type lockTap struct{ r *realLocker }

func (t lockTap) fx() *lockFx { return (*lockFx)(t.r.l) }

func (t lockTap) Added(e *engine.Entry) {
	defer t.r.release()
	if t.r.hold() {
		t.r.l.entry = e
	}
}

func (t lockTap) Granted(e *engine.Entry, name string, tm election.Term) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Granted(e, name, tm)
	}
}

func (t lockTap) Busy(e *engine.Entry, ld election.Leader, slots []election.Leader) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Busy(e, ld, slots)
	}
}

func (t lockTap) Refused(e *engine.Entry, err error) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Refused(e, err)
	}
}

func (t lockTap) Published(e *engine.Entry, s driver.Snapshot) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Published(e, s)
	}
}

func (t lockTap) Ended(e *engine.Entry, tm election.Term, r election.Reason) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Ended(e, tm, r)
	}
}

func (t lockTap) Retired(e *engine.Entry) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().Retired(e)
	} else {
		t.r.over()
	}
}

func (t lockTap) WakeNext(name, addr string) {
	defer t.r.release()
	if t.r.hold() {
		t.fx().WakeNext(name, addr)
	}
}

func (t lockTap) Answered(f *host.Flight, res election.Result) {
	defer t.r.release()
	if t.r.hold() {
		t.r.l.engineAnswered(f, res, f.TimedOut())
	}
}

func (t lockTap) Woken(e *engine.Entry, turn bool) {
	defer t.r.release()
	if t.r.hold() {
		t.r.l.tookWake(e, turn)
	}
}
