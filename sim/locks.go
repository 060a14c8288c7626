package sim

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// Lock clients: the second kind of process. On a lock scenario's nodes a
// process runs, instead of a Candidate, a program that takes locks one at
// a time with the code of tenure.Locker's locks (internal/lockcore under
// the shared driver): think, call TryLock or Lock (Fair or not) with a
// deadline, hold the lock a while, unlock, and again. Its locks are
// records of the one store (lock/0, lock/0::queue, ...), reached as the
// lease is; the checker holds them to I1 as mutual exclusion in belief,
// I2 per lock, I5 as a bounded wait, I6 and I7 (checker.go).

// lockPlan is what a lock scenario's clients do.
type lockPlan struct {
	Names    int              // locks contended: lock/0, lock/1, ...
	Fair     bool             // Lock calls wait in turn (Fair)
	TryOneIn int              // one call in TryOneIn is a TryLock; 0: none
	Wait     [2]time.Duration // each call's deadline, drawn in this range
	Hold     [2]time.Duration // how long a granted lock is held
	Think    [2]time.Duration // between a lock's end and the next call
	Slots    int              // each name is a semaphore of Slots slots; 0: a lock
	// SlotsAlt: with Slots, one call in two asks for this many slots
	// instead (callers that disagree on n; refused while a count record
	// stands); 0: every call asks for Slots.
	SlotsAlt int
}

// lockScenario makes a scenario of n nodes running lock clients, with
// defaults that build changes.
func lockScenario(name, summary string, n int, build func(p *plan, lp *lockPlan, r *rand.Rand)) *Scenario {
	return &Scenario{Name: name, Summary: summary, locks: true, build: func(p *plan, r *rand.Rand) {
		p.Nodes = p.Nodes[:0]
		for i := range n {
			p.Nodes = append(p.Nodes, newNodeSpec(r, string(rune('a'+i))))
		}
		p.Locks = &lockPlan{
			Names: 2, TryOneIn: 4,
			Wait:  [2]time.Duration{time.Second, 40 * time.Second},
			Hold:  [2]time.Duration{100 * time.Millisecond, 5 * time.Second},
			Think: [2]time.Duration{0, 3 * time.Second},
		}
		build(p, p.Locks, r)
	}}
}

// newProcess makes what runs an instance on the fast tier: a Candidate,
// or in a lock scenario a lock client.
func newProcess(in *instance) instRuntime {
	if in.w.plan.Locks != nil {
		return newLockClient(in)
	}
	if in.w.plan.Group != nil {
		return newGroupMember(in)
	}
	return newFastRun(in)
}

// lockClient is a lock client's process: the Locker's host (one timer for
// its lock's Due and its queue call's timeout) around one lockcore.Lock
// at a time.
type lockClient struct {
	in   *instance
	w    *world
	rng  *rand.Rand // the program's draws
	ht   hostTimer
	dead bool

	lk     *lockcore.Lock // the current call's lock; nil between calls
	sem    *lockcore.Sem  // or its semaphore call (Slots)
	name   string
	held   string    // the record held: the lock's, or the slot's
	reg    *register // its record
	try    bool
	fair   bool
	asked  time.Duration // true time of the call
	bound  time.Time     // local time by which it must be answered (I5)
	failed bool          // a queue call failed since the call
	ticket uint64        // last confirmed ticket of a fair call

	jeop     driver.Jeopardy
	jeopardy bool // the current hold was reported in jeopardy

	lockReq  *request  // the call in flight on the lock's record
	queueReq *request  // and on its queue's record
	queueBy  time.Time // that call's timeout
	semReqs  []semReq  // a semaphore's calls in flight
}

// semReq is a semaphore's call in flight: its slot and record, and its
// timeout unless its slot's lock times it (RecLock).
type semReq struct {
	r         *request
	slot, rec int
	by        time.Time
}

func newLockClient(in *instance) instRuntime {
	l := &lockClient{in: in, w: in.w, rng: rand.New(rand.NewPCG(in.w.seed, 0x10c0+uint64(in.num))), ht: hostTimer{in: in}}
	in.ht = &l.ht
	return l
}

func (l *lockClient) now() time.Time { return l.in.local() }

// after runs f once d has passed on the process's clock.
func (l *lockClient) after(d time.Duration, f func()) {
	l.w.newTimer(l.in, srcCallbacks, d).fire = f
}

func (l *lockClient) start() { l.think() }

// think waits, then makes the next call.
func (l *lockClient) think() {
	lp := l.w.plan.Locks
	l.after(uniform(l.rng, lp.Think[0], lp.Think[1]), l.call)
}

func (l *lockClient) call() {
	w, lp, in := l.w, l.w.plan.Locks, l.in
	if w.ending {
		return // the shutdown's stop comes
	}
	l.name = "lock/" + strconv.Itoa(l.rng.IntN(lp.Names))
	l.reg = w.store.register(l.name)
	l.try = lp.TryOneIn > 0 && l.rng.IntN(lp.TryOneIn) == 0
	l.fair = lp.Fair && !l.try
	wait := uniform(l.rng, lp.Wait[0], lp.Wait[1])
	l.asked, l.bound, l.failed, l.ticket = w.now, l.now().Add(wait+in.timing.OpTimeout), false, 0
	kind := "Lock"
	if l.try {
		kind = "TryLock"
	} else if l.fair {
		kind = "Lock(Fair)"
	}
	l.trace(kind + " " + l.name + " within " + wait.String())
	if lp.Slots > 0 {
		l.callSem(wait)
		return
	}
	lk := new(lockcore.Lock)
	l.lk = lk
	cfg := election.Config{ID: in.ID, Timing: in.timing, Rand: w.machineRand(in), Wall: in.wallNow, StaleReads: w.plan.StaleReads}
	if w.plan.Wake != nil {
		lk.SetWake(in.ID) // the instance's ID is its address
	}
	if w.opt.Strategy == Naive {
		lk.InitMachine(l, l.name, newNaive(cfg, in.wallNow), l.try, l.fair)
	} else if err := lk.Init(l, l.name, &cfg, l.try, l.fair); err != nil {
		panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the timing passed Validate
	}
	l.begin(lk, wait)
}

// call is a lock client's call: a lock's, or a semaphore's.
type call interface {
	Answer() bool
	Stop()
	Start()
}

// current returns the call under way, or nil.
func (l *lockClient) current() call {
	switch {
	case l.sem != nil:
		return l.sem
	case l.lk != nil:
		return l.lk
	}
	return nil
}

// begin starts c, to be given up at the caller's deadline, wait from now.
func (l *lockClient) begin(c call, wait time.Duration) {
	l.w.chk.asked(l)
	l.after(wait, func() { // the caller's context is done
		if l.current() == c && c.Answer() {
			l.answered("gave up")
			c.Stop()
			l.arm()
		}
	})
	c.Start()
	l.arm()
}

func (l *lockClient) trace(s string) { l.w.trace(l.in, line{what: mFault, text: s}) }

func (l *lockClient) answered(what string) {
	l.trace(l.name + ": " + what)
	l.w.chk.answered(l, what)
}

// pausedSinceCall reports whether the process was paused since its call.
func (l *lockClient) pausedSinceCall() bool { return l.in.paused || l.in.resumedAt > l.asked }

// upset reports whether the call was disturbed since it began: its process
// paused, its node cut off from the store, or a queue call failed. A fair
// waiter so disturbed may lose its place in the queue (I7 exempts it).
func (l *lockClient) upset() bool {
	return l.failed || l.pausedSinceCall() || l.in.node.cut || l.in.node.cutAt >= l.asked
}

// arm sets the host's timer for the earliest of the lock's Due and the
// queue call's timeout.
func (l *lockClient) arm() {
	var at time.Time
	if l.lk != nil {
		at = l.lk.Due()
	}
	if l.sem != nil {
		at = l.sem.Due()
		for _, q := range l.semReqs {
			if !q.by.IsZero() && (at.IsZero() || q.by.Before(at)) {
				at = q.by
			}
		}
		l.ht.set(at, l.semRequests()...)
		return
	}
	if !l.queueBy.IsZero() && (at.IsZero() || l.queueBy.Before(at)) {
		at = l.queueBy
	}
	l.ht.set(at, l.lockReq, l.queueReq)
}

func (l *lockClient) settleOwed() {
	switch {
	case l.dead:
		l.ht.owed = false
	case l.ht.owed && l.sem != nil:
		l.ht.check(l.semRequests()...)
	case l.ht.owed:
		l.ht.check(l.lockReq, l.queueReq)
	}
}

func (l *lockClient) fire(tm *timer) {
	switch {
	case l.dead:
	case tm.fire != nil:
		tm.fire()
	case l.sem != nil && l.ht.fired(tm):
		l.semFire()
	case l.ht.fired(tm):
		now := l.now()
		if !l.queueBy.IsZero() && !now.Before(l.queueBy) { // the queue call's context times out
			l.queueReq.abandoned, l.failed = true, true
			l.queueDone(election.Result{Err: election.ErrTimeout}, l.queueReq.kind == election.OpPut)
		}
		if l.lk != nil {
			if due := l.lk.Due(); !due.IsZero() && !now.Before(due) {
				l.lk.Fire(now)
			}
		}
		l.arm()
	}
}

func (l *lockClient) deliver(r *request) {
	if !l.dead && l.sem != nil {
		l.semDeliver(r)
		return
	}
	if l.dead || l.lk == nil {
		return
	}
	res := election.Result{ID: r.opID, Record: r.res.rec, Version: r.res.ver, Err: r.res.err}
	put := r.kind == election.OpPut
	if put && res.Err == nil {
		res.Record = r.rec // the host's answer to a write carries the record written
	}
	switch r {
	case l.lockReq:
		l.lockReq = nil
		l.lk.Result(res)
	case l.queueReq:
		if res.Err != nil && !errors.Is(res.Err, lease.ErrConflict) && !errors.Is(res.Err, lease.ErrNotFound) {
			l.failed = true
		}
		l.queueDone(res, put)
	}
	l.arm()
}

func (l *lockClient) queueDone(res election.Result, put bool) {
	l.queueReq, l.queueBy = nil, time.Time{}
	lk := l.lk
	lk.QueueResult(res, put)
	if t := lk.Ticket(); t != 0 && l.lk == lk {
		l.ticket = t
	}
}

// stop: the shutdown answers a call still waiting and gives the lock up;
// the process ends once its lock is over.
func (l *lockClient) stop() {
	c := l.current()
	if c == nil {
		l.finish()
		return
	}
	if c.Answer() {
		l.answered("shut down")
	}
	c.Stop()
	l.arm()
}

func (l *lockClient) finish() {
	l.ht.stop()
	l.w.stage(item{in: l.in, src: srcRun, kind: itRunDone})
}

func (l *lockClient) crash() {
	l.dead = true
	l.ht.stop()
	l.in.finished = true
	l.w.running--
}

func (l *lockClient) observed() election.Leader { return election.Leader{} }
func (l *lockClient) poll()                     {}

func (l *lockClient) release(r *request) {
	if r != l.lockReq && r != l.queueReq && !slices.ContainsFunc(l.semReqs, func(q semReq) bool { return q.r == r }) {
		l.w.spareReqs = append(l.w.spareReqs, r)
	}
}

// The lockcore.Host of the current lock.

func (l *lockClient) Now() time.Time { return l.now() }

func (l *lockClient) Call(op election.Op, rec int) {
	if rec != lockcore.RecLock {
		g := l.w.store.register(lockcore.RecordName(l.name, rec))
		l.queueReq, l.queueBy = l.w.call(l.in, op, g), l.now().Add(l.in.timing.OpTimeout)
	} else {
		l.lockReq = l.w.call(l.in, op, l.reg)
	}
}

func (l *lockClient) Cancel() {
	if l.lockReq != nil {
		l.lockReq.abandoned = true
		l.lockReq = nil
	}
}

func (l *lockClient) Log(slog.Level, string, ...any) {}

func (l *lockClient) Granted(t election.Term) {
	if l.sem == nil {
		l.held = l.name
	}
	l.jeopardy = false
	l.answered("granted, token " + strconv.FormatUint(uint64(t.Token), 10))
	if l.w.opt.Strategy == Naive {
		t.Deadline = time.Time{} // nothing to check it by
	}
	l.w.chk.granted(l, t)
	lk, sem := l.lk, l.sem
	lp := l.w.plan.Locks
	l.after(uniform(l.rng, lp.Hold[0], lp.Hold[1]), func() {
		switch {
		case lk != nil && l.lk == lk:
			l.trace("unlock " + l.name)
			lk.Stop()
		case sem != nil && l.sem == sem:
			l.trace("unlock " + l.held)
			sem.Stop()
		}
		l.arm()
	})
}

func (l *lockClient) Busy(h election.Leader) {
	l.answered("locked by " + h.Holder + " (token " + strconv.FormatUint(uint64(h.Token), 10) + ")")
}

func (l *lockClient) Refused(err error) { l.answered("refused: " + err.Error()) }

func (l *lockClient) Publish(s driver.Snapshot) {
	if s.Leading && l.w.opt.Strategy != Naive {
		l.w.chk.extended(l.in, s.Term.Deadline)
	}
	if l.jeop.Update(l.now(), s); !l.jeop.Since().IsZero() {
		l.jeopardy = true // not traced, as for a Candidate
	}
}

// Ended: a hold that ends for want of renewals, its process never paused,
// was reported in jeopardy first (I4).
func (l *lockClient) Ended(t election.Term, r election.Reason) {
	if (r == election.ReasonStoreUnavailable || r == election.ReasonExpired) && !l.jeopardy && !l.pausedSinceCall() && l.w.opt.Strategy != Naive {
		l.w.chk.violate(Callbacks, l.in, fmt.Sprintf("%s's hold of %s (token %d) ended for want of renewals (%s) and was never reported in jeopardy", l.in.label, l.held, t.Token, r))
	}
	l.jeopardy = false
	l.trace(l.held + " ended: " + r.String())
	l.w.chk.released(l.in)
}

// Reschedule: arm reads Due after every step, as the host does.
func (l *lockClient) Reschedule() {}

// WakeNext sends a wake-up for the lock over Plan.Wake's network.
func (l *lockClient) WakeNext(addr string) {
	l.trace("wake " + addr + " for " + l.name)
	l.w.sendWake(l.in, addr, false, l.name)
}

// woken takes a wake-up for lock: the current call's lock reads sooner if
// it waits for it, within the rate limit. Where the lock is free in the
// store as the wake-up arrives over a clean network, and it is the waiter's
// turn (a fair one at the head of its queue), someone must be granted the
// lock within the lock handoff bound (I5).
func (l *lockClient) woken(lock string) {
	if l.dead || l.lk == nil || lock != l.name { // a semaphore has no wake-ups
		return
	}
	lk := l.lk
	turn := lk.Turn()
	if lk.Wake() {
		l.w.chk.stats.WakesUsed++
		l.trace("woken: reading " + l.name)
		if wf := l.w.plan.Wake; wf != nil && *wf == (wakeFaults{}) && l.reg.rec.Released && turn {
			l.w.chk.lockHandoff(l, lk, l.w.lockHandoffBound())
		}
	}
	l.arm()
}

func (l *lockClient) Retired() {
	l.trace(l.name + " over")
	l.w.chk.released(l.in)
	l.lk, l.sem, l.lockReq, l.queueReq, l.queueBy, l.semReqs = nil, nil, nil, nil, time.Time{}, l.semReqs[:0]
	if l.in.stopped {
		l.finish()
		return
	}
	l.think()
}
