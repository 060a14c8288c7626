package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tenure-go/tenure/election"
)

// leaseName is the one lease every run campaigns for.
const leaseName = "sim/lease"

// endCap bounds how long after the planned end the run may take to shut
// down (release timeouts, slow callbacks); an instance whose Run has not
// returned by then breaks I6.
const endCap = 10 * time.Minute

// world is one run: true time, the event queue, the nodes and their
// instances, the store, the resource and the checker. An instance is a
// process of one of two kinds: a Candidate, or a lock client (locks.go).
// Both tiers drive the same world; they differ only in what runs an
// instance (instRuntime) and in how the scheduler lets it settle after each
// event.
type world struct {
	sc    *Scenario
	lease string // the lease the store models in full (stale reads, lost records, its feed); other names are plain records
	plan  *plan
	opt   Options
	seed  uint64
	rng   *rand.Rand // the scheduler's draws (latency, faults), in event order

	now time.Duration // true time since the start
	seq uint64        // orders events at equal times
	// upset: the last crash, stop, pause or cut-off, for I8's checks.
	upset time.Duration
	// onHandOver, if set, is called as a leader hands the lease over.
	onHandOver func(l *instance)
	q          eventQueue
	events     int64

	spareReqs []*request // fast tier: requests done with, for reuse

	nodes   []*node
	insts   []*instance
	running int // instances whose Run has not returned
	timerID uint64
	reqID   int64

	store *store
	res   *resource
	chk   *checker
	tr    *tracer
	tl    *drawing // nil unless Options.Timeline

	triggers []trigger
	healed   bool // heal ran: brownouts that end later leave the store healthy

	feedSilentUntil time.Duration // the change feed tells nobody anything until then (feed-silent)
	ending          bool

	// settle lets the instance that just received an event (nil: any) run
	// until it is idle, then flushes what it staged.
	user *userWorld // a user's world (simtest); nil in a scenario

	settle  func(in *instance)
	runtime func(*instance) instRuntime // makes what runs an instance
	shared  bool                        // real tier: goroutines read now (under mu)

	mu     sync.Mutex // guards staged and every instance.n: real-tier goroutines stage concurrently
	staged []item
	spare  []item
}

// node is a host: it keeps its clock and its link to the store across the
// processes (instances) that run on it.
type node struct {
	Name   string
	spec   *nodeSpec
	clk    clock
	epoch  uint32        // bumped at every change of rate: older timer events are stale
	timers []*timer      // scheduled, not yet fired; timer.slot indexes it
	cut    bool          // partitioned from the store
	cutAt  time.Duration // when it was last cut off; -1: never
	cur    *instance     // the latest instance
	starts int
}

// instance is one process on a node, running a Candidate or a lock client:
// a crash ends it, a restart makes a new one (with the same ID or a new
// one).
type instance struct {
	w      *world
	node   *node
	num    int             // position in world.insts: orders staged items
	ID     string          // the Candidate's ID
	label  string          // in traces: ID, or ID#k for the k-th process with that ID
	timing election.Timing // with defaults
	rt     instRuntime
	ht     *hostTimer // the fast tier's model of its host's timer
	cbRand *rand.Rand // slow callbacks' draws, made in callback order in both tiers
	lcRand *rand.Rand // the same for OnLeaderChange, which has a goroutine of its own

	crashed   bool
	stopped   bool // Run's context is done
	finished  bool // Run returned (or, fast tier, the instance crashed)
	paused    bool
	frozen    bool // the pause stopped the node's clock (VM suspend)
	pausedAt  time.Duration
	resumedAt time.Duration // -1: never paused
	held      []event       // events that arrived while paused

	lastArrival time.Duration // when the latest request it sent lands at the store

	n [nsrc]uint64 // items staged per source (guarded by world.mu)
	// inTerm: a term began and its OnDemoted has not returned, as staged
	// (guarded by world.mu). Staging follows causality in both tiers, while
	// processing follows the canonical order, so the check that a release
	// waits for the callbacks is made here.
	inTerm bool

	// Filled in by the checker and the tiers.
	deadline time.Time // latest local deadline of the current term
	cb       cbState
}

// instRuntime is what runs an instance: the fast tier's model of the
// Candidate's loop around an election.Machine (or the naive strategy) or
// its lock client, or the real tier's tenure.Candidate.
type instRuntime interface {
	start()
	stop()  // Run's context is done
	crash() // the process is gone
	fire(tm *timer)
	deliver(req *request)
	observed() election.Leader // the leader it last saw in the store
	poll()                     // real tier: read Status after a phase
}

func (in *instance) local() time.Time {
	return in.node.clk.localAt(in.w.now)
}

// prevLocal is the reading of in's clock one true nanosecond ago.
func (in *instance) prevLocal() time.Time {
	c := &in.node.clk
	if in.w.now-1 < c.t0 {
		return localEpoch.Add(c.l0 - 1)
	}
	return localEpoch.Add(c.mono(in.w.now - 1))
}

func (in *instance) wallNow() time.Time {
	return localEpoch.Add(in.node.clk.mono(in.w.now) + in.node.clk.wall)
}

func (in *instance) live() bool { return !in.crashed && !in.finished }

type evKind uint8

const (
	evAction  evKind = iota + 1 // act
	evTimer                     // tm fires
	evArrive                    // req reaches the store
	evRespond                   // req's answer reaches its instance
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  evKind
	epoch uint32    // evTimer: the node's epoch when scheduled
	in    *instance // evAction: held while this instance is paused
	tm    *timer
	req   *request
	act   func()
}

// eventQueue orders the events by (at, seq). The heap holds only (at, seq,
// slot) and the events wait in a slab, so that sifting moves no pointers:
// with pointers, every move costs GC write barriers.
type eventQueue struct {
	heap timeHeap[int32]
	slab []event
	free []int32
}

func (q *eventQueue) len() int { return q.heap.len() }

func (q *eventQueue) push(e event) {
	var slot int32
	if n := len(q.free); n > 0 {
		slot = q.free[n-1]
		q.free = q.free[:n-1]
		q.slab[slot] = e
	} else {
		slot = int32(len(q.slab))
		q.slab = append(q.slab, e)
	}
	q.heap.push(e.at, e.seq, slot)
}

func (q *eventQueue) pop() event {
	slot := q.heap.pop()
	e := q.slab[slot]
	q.slab[slot] = event{}
	q.free = append(q.free, slot)
	return e
}

// newWorld returns a world whose instances runtime makes: newFastRun for
// the fast tier; the real tier (a test) passes its own.
func newWorld(sc *Scenario, seed uint64, opt Options, runtime func(*instance) instRuntime) *world {
	plan := sc.plan(seed)
	w := &world{
		sc:      sc,
		lease:   leaseName,
		plan:    plan,
		opt:     opt,
		seed:    seed,
		rng:     rand.New(rand.NewPCG(seed, 0x5eed_0001)),
		runtime: runtime,
	}
	w.tr = newTracer(opt.Trace)
	if opt.Timeline {
		w.tl = &drawing{}
	}
	w.store = newStore(w, plan.Latency, plan.Faults)
	w.res = &resource{w: w, fenced: opt.Resource != Unfenced}
	w.chk = newChecker(w, plan.Requires)
	for _, spec := range plan.Nodes {
		n := &node{
			Name:  spec.Name,
			spec:  spec,
			clk:   clock{l0: spec.MonoOffset, ppb: spec.PPB, wall: spec.WallOffset},
			cutAt: -1,
		}
		w.nodes = append(w.nodes, n)
		if w.tl != nil {
			w.tl.node(n)
		}
	}
	return w
}

// run plays the plan to its end and then shuts every instance down.
func (w *world) run() {
	for _, a := range w.plan.actions {
		w.at(a.at, nil, func() { a.f(w) })
	}
	for _, n := range w.nodes {
		if n.spec.Start >= 0 {
			w.at(n.spec.Start, nil, func() { w.startOn(n, n.Name) })
		}
	}
	w.at(w.plan.Duration, nil, w.shutdown)
	limit := w.plan.Duration + endCap
	for w.q.len() > 0 {
		e := w.q.pop()
		if e.at > limit {
			break
		}
		w.setNow(e.at)
		w.events++
		w.fire(&e)
		if r := e.req; r != nil {
			if r.pending--; r.pending == 0 && r.reused {
				r.in.rt.(reusing).release(r)
			}
		}
		if w.ending && w.running == 0 {
			break
		}
	}
	for _, in := range w.insts {
		if !in.finished {
			w.chk.violate(Goroutines, in, fmt.Sprintf("%s: Run did not return within %v of the shutdown", in.label, endCap))
		}
	}
	w.chk.finish()
	w.tr.flush()
}

// setNow advances true time. In the real tier it does so under mu, which
// the instances' clocks take to read it: synctest.Wait orders the phases in
// time, but the race detector only sees the mutex.
func (w *world) setNow(t time.Duration) {
	if w.shared {
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	w.now = t
}

func (w *world) push(e event) {
	w.seq++
	e.seq = w.seq
	if e.req != nil {
		e.req.pending++
	}
	w.q.push(e)
}

// at schedules f at true time t; an action for an instance waits while the
// instance is paused (a signal is handled when the process runs again).
func (w *world) at(t time.Duration, in *instance, f func()) {
	w.push(event{at: max(t, w.now), kind: evAction, in: in, act: f})
}

func (w *world) fire(e *event) {
	switch e.kind {
	case evAction:
		if in := e.in; in != nil {
			if !in.live() {
				return
			}
			if in.paused {
				in.held = append(in.held, *e)
				return
			}
		}
		e.act()
		w.settle(e.in)
	case evTimer:
		tm := e.tm
		n := tm.in.node
		if e.epoch != n.epoch {
			return // rescheduled at a change of rate
		}
		n.unlist(tm)
		in := tm.in
		if tm.dead || in.finished {
			return
		}
		if in.paused {
			in.held = append(in.held, *e)
			return
		}
		in.rt.fire(tm)
		w.settle(in)
	case evArrive:
		e.req.next = never
		w.store.arrive(e.req)
		w.owed(e.req.in)
	case evRespond:
		e.req.next = never
		w.store.respond(e)
		w.owed(e.req.in)
	}
}
