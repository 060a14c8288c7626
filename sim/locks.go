package sim

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/lockcore"
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

// lockClient is a lock client's process: the program (think, call, hold,
// unlock) around the production Locker's engine (internal/engine) on the
// production host.Core (engineHost), one call at a time. The program sees
// its calls' events through lockFx, the Locker's effects, as
// tenure.Locker's callers see them through its channels.
type lockClient struct {
	in   *instance
	w    *world
	rng  *rand.Rand // the program's draws
	dead bool

	eng   *engineHost
	lkr   *engine.Locker
	cfg   *election.Config // the Machines' configuration
	entry *engine.Entry    // the current call; nil between calls

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

	// real: the real tier's program, which makes the calls through
	// tenure.Locker and hears from its entries through the engine's tap;
	// nil on the fast tier, where the client steps the entries itself.
	real lockProgram
}

// lockProgram is the real tier's side of a lock client.
type lockProgram interface {
	over()        // the call is over (Retired): think, or end if stopped
	gaveUp() bool // the call's context ended at its deadline
}

func newLockClient(in *instance) instRuntime {
	l := &lockClient{in: in, w: in.w, rng: lockRand(in)}
	l.eng = newEngineHost(in)
	l.eng.answered = l.engineAnswered
	in.ht = &l.eng.ht
	wake := ""
	if in.w.plan.Wake != nil {
		wake = in.ID // the instance's ID is its address
	}
	l.lkr = engine.NewLocker(l.eng.core, (*lockFx)(l), in.ID, wake)
	// Every lock shares the Machines' configuration, its Rand with it, as
	// tenure.Locker's do.
	l.cfg = &election.Config{ID: in.ID, Timing: in.timing, Rand: in.w.machineRand(in), Wall: in.wallNow, StaleReads: in.w.plan.StaleReads, ClockTokens: in.w.clockTokens()}
	return l
}

// lockRand seeds a lock client's program: distinct per instance, the same
// in both tiers.
func lockRand(in *instance) *rand.Rand {
	return rand.New(rand.NewPCG(in.w.seed, 0x10c0+uint64(in.num)))
}

// client returns the lock client.
func (l *lockClient) client() *lockClient { return l }

// lockProc is a lock client's process, of either tier.
type lockProc interface{ client() *lockClient }

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

// call makes the next call, a lock's or a semaphore's, with a deadline.
func (l *lockClient) call() {
	w, in := l.w, l.in
	if w.ending {
		return // the shutdown's stop comes
	}
	wait, n := l.draw()
	c := engine.Call{Name: l.name, Config: l.cfg, Try: l.try, Fair: l.fair, Slots: n}
	if w.opt.Strategy == Naive {
		c.Machine = func(cfg *election.Config) lockcore.Machine { return newNaive(*cfg, in.wallNow) }
	}
	e := l.lkr.NewEntry(c, nil)
	l.entry = e
	l.after(wait, func() { // the caller's context is done
		if l.entry == e && e.Answer() {
			l.answered("gave up")
			l.lkr.Stop(e)
			l.arm()
		}
	})
	l.lkr.Add(e)
	l.arm()
}

// draw draws the next call (its lock, its kind, how long it waits, how
// many slots it asks for: 0 for a lock), traces it, and tells the
// checker it waits.
func (l *lockClient) draw() (wait time.Duration, slots int) {
	w, lp, in := l.w, l.w.plan.Locks, l.in
	l.name = "lock/" + strconv.Itoa(l.rng.IntN(lp.Names))
	l.reg = w.store.register(l.name)
	l.try = lp.TryOneIn > 0 && l.rng.IntN(lp.TryOneIn) == 0
	l.fair = lp.Fair && !l.try
	wait = uniform(l.rng, lp.Wait[0], lp.Wait[1])
	l.asked, l.bound, l.failed, l.ticket = w.now, l.now().Add(wait+in.timing.OpTimeout), false, 0
	kind := "Lock"
	if l.try {
		kind = "TryLock"
	} else if l.fair {
		kind = "Lock(Fair)"
	}
	l.trace(kind + " " + l.name + " within " + wait.String())
	slots = lp.Slots
	if alt := lp.SlotsAlt; slots > 0 && alt > 0 && l.rng.IntN(2) == 0 {
		slots = alt
	}
	w.chk.asked(l)
	return wait, slots
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

// arm sets the host's timer.
func (l *lockClient) arm() { l.eng.arm() }

func (l *lockClient) settleOwed() {
	if l.dead {
		l.eng.ht.owed = false
		return
	}
	l.eng.settleOwed()
}

func (l *lockClient) fire(tm *timer) {
	switch {
	case l.dead:
	case tm.fire != nil:
		tm.fire()
	default:
		l.eng.fired(tm)
	}
}

func (l *lockClient) deliver(r *request) {
	if !l.dead {
		l.eng.deliver(r)
	}
}

// stop: the shutdown answers a call still waiting and gives the lock up;
// the process ends once its lock is over.
func (l *lockClient) stop() {
	e := l.entry
	if e == nil {
		l.finish()
		return
	}
	if e.Answer() {
		l.answered("shut down")
	}
	l.lkr.Stop(e)
	l.arm()
}

func (l *lockClient) finish() {
	l.eng.stop()
	l.w.stage(item{in: l.in, src: srcRun, kind: itRunDone})
}

func (l *lockClient) crash() {
	l.dead = true
	l.eng.stop()
	l.in.finished = true
	l.w.running--
}

func (l *lockClient) observed() election.Leader { return election.Leader{} }
func (l *lockClient) poll()                     {}

func (l *lockClient) release(r *request) { l.eng.release(r) }

func (l *lockClient) Publish(s driver.Snapshot) {
	if s.Leading && l.w.opt.Strategy != Naive {
		l.w.chk.extended(l.in, s.Term.Deadline)
	}
	if l.jeop.Update(l.now(), s); !l.jeop.Since().IsZero() {
		l.jeopardy = true // not traced, as for a Candidate
	}
}
