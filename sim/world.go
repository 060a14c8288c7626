package sim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// leaseName is the one lease every run campaigns for.
const leaseName = "sim/lease"

// endCap bounds how long after the planned end the run may take to shut
// down (release timeouts, slow callbacks); an instance whose Run has not
// returned by then breaks I6.
const endCap = 10 * time.Minute

// world is one run: true time, the event queue, the nodes and their
// instances, the store, the resource and the checker. Both tiers drive the
// same world; they differ only in what runs an instance (instRuntime) and
// in how the scheduler lets it settle after each event.
type world struct {
	sc   *Scenario
	plan *plan
	opt  Options
	seed uint64
	rng  *rand.Rand // the scheduler's draws (latency, faults), in event order

	now    time.Duration // true time since the start
	seq    uint64        // orders events at equal times
	q      eventQueue
	events int64

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
	tl    *Timeline // nil unless Options.Timeline

	triggers []trigger
	healed   bool // heal ran: brownouts that end later leave the store healthy
	ending   bool

	// settle lets the instance that just received an event (nil: any) run
	// until it is idle, then flushes what it staged.
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
	epoch  uint32    // bumped at every change of rate: older timer events are stale
	timers []*timer  // scheduled, not yet fired; timer.slot indexes it
	cut    bool      // partitioned from the store
	cur    *instance // the latest instance
	starts int
}

// instance is one process running a Candidate on a node: a crash ends it, a
// restart makes a new one (with the same ID or a new one).
type instance struct {
	w      *world
	node   *node
	num    int             // position in world.insts: orders staged items
	ID     string          // the Candidate's ID
	label  string          // in traces: ID, or ID#k for the k-th process with that ID
	timing election.Timing // with defaults
	rt     instRuntime
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
// Candidate's loop around an election.Machine (or the naive strategy), or
// the real tier's tenure.Candidate.
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

// source says which goroutine of an instance staged an item. Within one
// phase (the processing of one event) each source is a single goroutine,
// so sorting staged items by (instance, source, count) gives one order
// however the runtime interleaved the goroutines.
type source uint8

const (
	srcRunner    source = iota // the Candidate's loop: its timers and its term log
	srcStore                   // store calls
	srcCallbacks               // the callback goroutine: callbacks and the leader's work
	srcLeader                  // the goroutine that delivers OnLeaderChange
	srcRun                     // the goroutine that called Run
	nsrc
)

type itemKind uint8

const (
	itTimer         itemKind = iota + 1 // tm: a timer to schedule
	itRequest                           // req: a store call to send
	itElected                           // tok: the loop began a term
	itDemoted                           // tok, s (reason), deadline (fast tier): the loop ended it
	itCbElected                         // tok: OnElected began
	itCbReturn                          // OnElected returned
	itCbDemoted                         // tok, s (reason), flag (the term's context was done)
	itCbDemotedDone                     // OnDemoted returned
	itCbLeader                          // tok, s (holder)
	itCheck                             // tok: the leader checked its context before acting
	itWrite                             // tok: the leader wrote to the resource
	itRunDone                           // s: Run's error
	itViolation                         // inv, s
)

type item struct {
	in       *instance
	src      source
	n        uint64
	kind     itemKind
	tok      uint64
	s        string
	flag     bool
	inv      Invariant
	deadline time.Time
	tm       *timer
	req      *request
}

type timer struct {
	in     *instance
	id     uint64        // order of scheduling, to reschedule deterministically
	target time.Duration // monotonic reading at which it fires
	slot   int           // index in node.timers, -1 when not there
	fire   func()        // fast tier; nil for the runner's wake-up (fastRun.wakeUp)
	ch     chan time.Time
	dead   bool // fast tier: nobody waits for it any more
}

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
		plan:    plan,
		opt:     opt,
		seed:    seed,
		rng:     rand.New(rand.NewPCG(seed, 0x5eed_0001)),
		runtime: runtime,
	}
	w.tr = newTracer(opt.Trace)
	if opt.Timeline {
		w.tl = &Timeline{}
	}
	w.store = newStore(w, plan.Latency, plan.Faults)
	w.res = &resource{w: w, fenced: opt.Resource != Unfenced}
	w.chk = newChecker(w, plan.Requires)
	for _, spec := range plan.Nodes {
		n := &node{
			Name: spec.Name,
			spec: spec,
			clk:  clock{l0: spec.MonoOffset, ppb: spec.PPB, wall: spec.WallOffset},
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
				r.in.rt.(*fastRun).release(r)
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

// stage records an item from an instance's goroutine (or its fast-tier
// model); flush processes the phase's items in canonical order.
func (w *world) stage(it item) {
	if w.shared { // the fast tier runs on one goroutine
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	it.n = it.in.n[it.src]
	it.in.n[it.src]++
	switch {
	case it.kind == itElected:
		it.in.inTerm = true
	case it.kind == itCbDemotedDone:
		it.in.inTerm = false
	case it.kind == itRequest && it.req.rec.Released:
		it.req.early = it.in.inTerm
	}
	w.staged = append(w.staged, it)
}

func (w *world) flush() {
	if w.shared {
		w.mu.Lock()
	}
	items := w.staged
	w.staged = w.spare[:0]
	if w.shared {
		w.mu.Unlock()
	}
	// Insertion sort: a phase stages a handful of items.
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && itemLess(&items[j], &items[j-1]); j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
	for i := range items {
		w.process(&items[i])
		items[i] = item{}
	}
	w.spare = items[:0]
}

func itemLess(a, b *item) bool {
	if a.in.num != b.in.num {
		return a.in.num < b.in.num
	}
	if a.src != b.src {
		return a.src < b.src
	}
	return a.n < b.n
}

func (w *world) process(it *item) {
	in := it.in
	switch it.kind {
	case itTimer:
		w.schedule(it.tm)
		return
	case itRunDone:
		in.finished = true
		w.running--
		if !in.crashed {
			w.trace(in, line{what: mRunDone, text: it.s})
		}
		if w.tl != nil && in == in.node.cur {
			w.tl.down(in.node, w.now)
		}
		return
	}
	if in.crashed {
		return // a dead process's goroutines wind down unseen (real tier)
	}
	switch it.kind {
	case itRequest:
		w.store.send(it.req)
		w.owed(in)
	case itElected:
		w.chk.elected(in, it.tok)
	case itDemoted:
		if !it.deadline.IsZero() {
			in.deadline = it.deadline
		}
		w.chk.demoted(in, it.tok, it.s)
	case itCbElected:
		w.chk.cbElected(in, it.tok)
	case itCbReturn:
		w.chk.cbReturned(in)
	case itCbDemoted:
		w.chk.cbDemoted(in, it.tok, it.s, it.flag)
	case itCbDemotedDone:
		w.chk.cbDemotedDone(in)
	case itCbLeader:
		w.trace(in, line{what: mOnLeader, tok: int64(it.tok), holder: it.s})
	case itCheck:
		w.trace(in, line{what: mCheck, tok: int64(it.tok)})
		w.hook(hookCheck, in)
	case itWrite:
		w.res.write(in, it.tok)
	case itViolation:
		w.chk.violate(it.inv, in, it.s)
	}
}

// newTimer returns a timer of in that fires when in's monotonic clock has
// measured d from now. It is staged, so it is scheduled in canonical order.
func (w *world) newTimer(in *instance, src source, d time.Duration) *timer {
	tm := &timer{in: in, target: in.node.clk.mono(w.now) + max(d, 0)}
	w.stage(item{in: in, src: src, kind: itTimer, tm: tm})
	return tm
}

// owed lets a fast-tier instance schedule the wake-up it put off, once
// one of its call's events has run (fastRun.checkOwed).
func (w *world) owed(in *instance) {
	if f, ok := in.rt.(*fastRun); ok && f.owed {
		f.checkOwed()
	}
}

func (w *world) schedule(tm *timer) {
	w.timerID++
	tm.id = w.timerID
	n := tm.in.node
	tm.slot = len(n.timers)
	n.timers = append(n.timers, tm)
	w.pushTimer(tm)
}

func (w *world) pushTimer(tm *timer) {
	n := tm.in.node
	if at := n.clk.trueAt(w.now, tm.target); at != never {
		w.push(event{at: at, kind: evTimer, tm: tm, epoch: n.epoch})
	}
}

// unlist removes tm from n.timers, if there.
func (n *node) unlist(tm *timer) {
	i := tm.slot
	if i < 0 || i >= len(n.timers) || n.timers[i] != tm {
		return
	}
	last := n.timers[len(n.timers)-1]
	n.timers[i], last.slot = last, i
	n.timers[len(n.timers)-1] = nil
	n.timers = n.timers[:len(n.timers)-1]
	tm.slot = -1
}

// setRate changes n's clock rate from now on and reschedules its timers,
// which fire by its monotonic readings.
func (w *world) setRate(n *node, ppb int64) {
	n.clk.setRate(w.now, ppb)
	n.epoch++
	ts := slices.Clone(n.timers)
	slices.SortFunc(ts, func(a, b *timer) int { return cmp.Compare(a.id, b.id) })
	for _, tm := range ts {
		w.pushTimer(tm)
	}
}

func (w *world) trace(in *instance, l line) {
	who := ""
	if in != nil {
		who = in.label
	}
	w.tr.add(w.now, who, l)
}

func (w *world) fault(who, format string, args ...any) {
	w.tr.add(w.now, who, line{what: mFault, text: fmt.Sprintf(format, args...)})
}

// Scenario actions. They run as events, in both tiers alike. Once heal has
// run, actions that would inject a fault do nothing: scenarios draw their
// faults before the heal, but some land later (a pause armed for the next
// check, a restart after a delay).

// startOn starts a new instance with the given ID on n.
func (w *world) startOn(n *node, id string) *instance {
	n.starts++
	label := id
	same := 0
	for _, o := range w.insts {
		if o.ID == id {
			same++
		}
	}
	if same > 0 {
		label = fmt.Sprintf("%s#%d", id, same+1)
	}
	timing := n.spec.timing()
	in := &instance{
		w: w, node: n, num: len(w.insts), ID: id, label: label, timing: timing,
		cbRand:    rand.New(rand.NewPCG(w.seed, 0xcb00+uint64(len(w.insts)))),
		lcRand:    rand.New(rand.NewPCG(w.seed, 0x1c00+uint64(len(w.insts)))),
		resumedAt: -1,
	}
	w.insts = append(w.insts, in)
	n.cur = in
	w.running++
	w.fault(label, "start: lease %v, clock %s", timing.LeaseDuration, n.clockString(w.now))
	if w.tl != nil {
		w.tl.up(n, w.now)
	}
	in.rt = w.runtime(in)
	in.rt.start()
	return in
}

// restart starts the next process on n: with n's first ID, or with a new one.
func (w *world) restart(n *node, newID bool) *instance {
	id := n.Name
	if newID {
		id = fmt.Sprintf("%s%d", n.Name, n.starts+1)
	}
	return w.startOn(n, id)
}

// crash ends in at once: no release, no more requests; requests already on
// the wire still land.
func (w *world) crash(in *instance) {
	if !in.live() || w.healed {
		return
	}
	w.fault(in.label, "crash")
	w.chk.crashed(in)
	in.crashed = true
	if w.tl != nil {
		w.tl.down(in.node, w.now)
	}
	if in.paused {
		w.resume(in)
	}
	in.rt.crash()
}

// stop delivers the shutdown signal: Run's context is done.
func (w *world) stop(in *instance) {
	w.at(w.now, in, func() {
		w.fault(in.label, "stop")
		in.stopped = true
		in.rt.stop()
	})
}

// pause freezes in for d: nothing it waits for reaches it until it resumes.
// With freeze, the node's monotonic clock stands still too, as across a VM
// suspend, and its wall clock is stepped forward at the end.
func (w *world) pause(in *instance, d time.Duration, freeze bool) {
	if !in.live() || in.paused || w.healed {
		return
	}
	in.paused, in.frozen, in.pausedAt = true, freeze, w.now
	if freeze {
		w.fault(in.label, "suspend the VM for %v (clock stops)", d)
		w.setRate(in.node, ppbFrozen)
	} else {
		w.fault(in.label, "pause the process for %v", d)
	}
	w.chk.stats.Pauses++
	w.at(w.now+d, nil, func() { w.resume(in) })
}

func (w *world) resume(in *instance) {
	if !in.paused {
		return
	}
	n := in.node
	in.paused = false
	in.resumedAt = w.now
	if in.frozen {
		in.frozen = false
		w.setRate(n, n.spec.PPB)
		n.clk.wall += w.now - in.pausedAt // NTP steps the wall clock to the time lost
		w.fault(in.label, "resume the VM; wall clock stepped %v", w.now-in.pausedAt)
	} else if !in.crashed {
		w.fault(in.label, "resume the process")
	}
	if w.tl != nil {
		w.tl.pause(n, in.pausedAt, w.now)
	}
	held := in.held
	in.held = nil
	for _, e := range held {
		e.at = w.now
		if e.req != nil {
			e.req.pending-- // push counts it again
		}
		if e.kind == evTimer {
			// Listed again, so that a change of rate at this same instant
			// (heal clamps rates) reschedules it rather than leaving the
			// event stale.
			e.epoch = n.epoch
			e.tm.slot = len(n.timers)
			n.timers = append(n.timers, e.tm)
		}
		w.push(e)
	}
}

// loseRecord deletes the lease record, as an operator, a TTL attribute or
// a lifecycle rule would, or a store that lost its data.
func (w *world) loseRecord() {
	s := w.store
	if w.healed {
		return
	}
	if !s.exists {
		w.fault("", "no lease record to lose")
		return
	}
	w.fault("", "the lease record (token %d) vanishes", s.rec.Token)
	s.replaced()
	s.exists, s.rec, s.ver, s.lostAt = false, lease.Record{}, lease.NoVersion, w.now
	w.chk.stats.Losses++
}

// restoreRecord writes back an older record, as a restored backup or a
// careless tool would: frac picks it among the records the store kept (the
// released ones, if released and there are any).
func (w *world) restoreRecord(frac float64, released bool) {
	s := w.store
	if w.healed {
		return
	}
	pool := s.history
	if released {
		var rel []lease.Record
		for _, r := range s.history {
			if r.Released {
				rel = append(rel, r)
			}
		}
		if len(rel) > 0 {
			pool = rel
		}
	}
	if len(pool) == 0 {
		w.fault("", "no older record to write back")
		return
	}
	old := pool[min(int(frac*float64(len(pool))), len(pool)-1)]
	s.replaced()
	s.verN++
	s.ver = lease.Version("v" + strconv.Itoa(s.verN))
	s.rec, s.exists, s.lostAt = old.Clone(), true, w.now
	w.chk.stats.Losses++
	flags := ""
	if old.Released {
		flags = ", released"
	}
	w.fault("", "an older record is written back: %s token %d%s", old.Holder, old.Token, flags)
}

// cutOff partitions n from the store (both ways) or heals it.
func (w *world) cutOff(n *node, on bool) {
	if n.cut == on || on && w.healed {
		return
	}
	n.cut = on
	if on {
		w.fault(n.Name, "cut off from the store")
		if w.tl != nil {
			w.tl.cutStart(n, w.now)
		}
	} else {
		w.fault(n.Name, "reconnected to the store")
		if w.tl != nil {
			w.tl.cutEnd(n, w.now)
		}
	}
}

// stepWall sets n's wall clock by d; only the naive strategy reads it.
func (w *world) stepWall(n *node, d time.Duration) {
	if w.healed {
		return
	}
	n.clk.wall += d
	w.fault(n.Name, "wall clock stepped by %v", d)
	if w.tl != nil {
		w.tl.step(n, w.now, d)
	}
}

// rate sets n's clock rate error, in parts per billion, from now on. After
// heal only rates within the node's bound are taken.
func (w *world) rate(n *node, ppb int64) {
	if bound := ppbOf(n.spec.maxDrift()); w.healed && (ppb > bound || ppb < -bound) {
		return
	}
	n.spec.PPB = ppb
	if cur := n.cur; cur != nil && cur.frozen {
		return // applied on resume
	}
	w.setRate(n, ppb)
	w.fault(n.Name, "clock rate %+dppm", ppb/1000)
}

// leader returns an instance that acts as leader now, or nil.
func (w *world) leader() *instance {
	for _, in := range w.insts {
		if in.live() && w.chk.open[in] != nil {
			return in
		}
	}
	return nil
}

// liveInstances returns the instances running now, in order.
func (w *world) liveInstances() []*instance {
	var out []*instance
	for _, in := range w.insts {
		if in.live() {
			out = append(out, in)
		}
	}
	return out
}

// heal ends every fault: the store is healthy again, no node is cut off or
// paused, clocks drift within the bound, and every node runs a process.
func (w *world) heal() {
	w.fault("", "heal: faults end")
	w.healed = true
	w.triggers = nil // a pause armed for the next check would come after
	w.store.lat, w.store.f = healthyLatency, faults{}
	for _, n := range w.nodes {
		w.cutOff(n, false)
		if cur := n.cur; cur != nil && cur.paused {
			w.resume(cur)
		}
		if bound := ppbOf(n.spec.maxDrift()); n.spec.PPB > bound || n.spec.PPB < -bound {
			w.rate(n, max(min(n.spec.PPB, bound), -bound))
		}
		if n.cur == nil || !n.cur.live() {
			w.restart(n, false)
		}
	}
}

// shutdown stops every instance, as at the end of a deployment.
func (w *world) shutdown() {
	if w.ending {
		return // a scenario ended the run early
	}
	w.fault("", "shut down every instance")
	w.chk.beforeShutdown()
	w.ending = true
	for _, in := range w.liveInstances() {
		if in.paused {
			w.resume(in)
		}
		w.stop(in)
	}
}

// hooks: one-shot triggers that scenarios arm to act at a precise point.
type hook uint8

const (
	hookCheck       hook = iota + 1 // the instance checked its term before acting
	hookRenewalSent                 // the instance sent a renewal
	hookRenewed                     // the instance received a successful renewal's answer
)

type trigger struct {
	in *instance
	on hook
	f  func()
}

// arm runs f, as an event at the same instant, the next time in reaches on.
func (w *world) arm(in *instance, on hook, f func()) {
	w.triggers = append(w.triggers, trigger{in: in, on: on, f: f})
}

func (w *world) hook(on hook, in *instance) {
	for i := 0; i < len(w.triggers); i++ {
		if t := w.triggers[i]; t.on == on && t.in == in {
			w.triggers = slices.Delete(w.triggers, i, i+1)
			w.at(w.now, nil, t.f)
			return
		}
	}
}

// ppbOf converts a drift bound ρ to parts per billion.
func ppbOf(rho float64) int64 { return int64(rho*1e9 + 0.5) }

// trueSpan bounds the true time a clock running within ρ (in ppb) of true
// time takes to measure local: ⌈local/(1-ρ)⌉.
func trueSpan(local time.Duration, ppb int64) time.Duration {
	return time.Duration(mulDivFloor(int64(local), 1e9, 1e9-ppb)) + 1
}

// failoverBound is I5's bound after the leader in stops without releasing.
// With L the longest one-way delay: the leader's last write may still be on
// the wire at the crash (L); a follower's read that lands just before it is
// answered (L), the next read goes out a poll interval later and is answered
// (2L): that is when the follower first sees the write. It then waits
// ttl×(1+ρ) by its clock; a read may be in flight then (2L), and the
// takeover is one more round trip (2L). Hence ttl×(1+ρ)/(1-ρ) +
// poll/(1-ρ) + 4 round trips, in true time. Only scenarios whose latency is
// bounded by L expect it (Plan.Failover): a lost answer or a delayed write
// is latency without bound.
//
// A write of the leader's that lands later than L (a delayed write) counts
// as on the wire until it lands.
//
// With a standby (ColdPollInterval), the bound holds while a standby reads
// at the hot cadence. With none (it crashed, is paused, or has yet to be
// found), the cold followers find the last record within a cold poll and
// check it again one cold poll later: cold + wait + cold, and a read before
// the takeover (2L more).
func (w *world) failoverBound(in *instance) time.Duration {
	ttl := in.timing.LeaseDuration
	poll, rho := w.pollAndDrift(in)
	ppb := ppbOf(rho)
	l := w.store.lat.Bound()
	wire := max(in.lastArrival-w.now, l)
	wait := trueSpan(election.WaitBeforeTakeover(ttl, rho), ppb) + w.staleMax()
	if cold := w.coldPoll(in); cold > 0 && !w.hotStandbyBesides(in) {
		w.chk.stats.ColdBounds++
		return wire + trueSpan(cold, ppb) + wait + trueSpan(cold, ppb) + 9*l + time.Millisecond
	}
	return wire + wait + trueSpan(poll, ppb) + 7*l + time.Millisecond
}

// staleMax is how old a stale read may be. With stale polls, a follower
// may see the leader's last record as changed until that long after it
// landed, and a release only then: both bounds grow by it (and the
// release's by the strong read that confirms it).
func (w *world) staleMax() time.Duration {
	if !w.plan.StaleReads || w.store.f.StalePPM == 0 {
		return 0
	}
	return w.store.f.StaleMax
}

// coldPoll returns the longest cold poll of the live instances but in, or
// 0 without a standby.
func (w *world) coldPoll(in *instance) time.Duration {
	var c time.Duration
	for _, o := range w.liveInstances() {
		if o != in && o.timing.ColdPollInterval > 0 {
			c = max(c, election.MaxPoll(o.timing.ColdPollInterval))
		}
	}
	return c
}

// hotStandbyBesides reports whether a live instance other than in, not
// paused, is the standby.
func (w *world) hotStandbyBesides(in *instance) bool {
	for _, o := range w.liveInstances() {
		if f, ok := o.rt.(*fastRun); ok && o != in && !o.paused && f.hotStandby() {
			return true
		}
	}
	return false
}

// sendWake sends a wake-up from in to the instance with ID to, over the
// network of Plan.Wake.
func (w *world) sendWake(from *instance, to string) {
	var target *instance
	for _, o := range w.liveInstances() {
		if o.ID == to {
			target = o
		}
	}
	wf := w.plan.Wake
	w.chk.stats.WakesSent++
	if target == nil || chance(w.rng, wf.LossPPM) {
		w.chk.stats.WakesLost++
		w.trace(from, line{what: mFault, text: "wake-up to " + to + " lost"})
		return
	}
	copies := 1
	if chance(w.rng, wf.DupPPM) {
		copies = 2
	}
	for range copies {
		d := w.store.lat.draw(w.rng)
		if chance(w.rng, wf.DelayPPM) {
			d += uniform(w.rng, time.Millisecond, max(wf.DelayMax, time.Millisecond))
		}
		w.at(w.now+d, target, func() {
			if f, ok := target.rt.(*fastRun); ok {
				f.woken()
			}
		})
	}
}

// releaseBound is I5's bound after the leader in shuts down with nothing
// slow in its callbacks: its release lands (L), followers see it as above
// (a poll interval and 3L) and take over (a read in flight, then a round
// trip: 4L).
//
// With a standby but none reading at the hot cadence, the cold followers
// find the release within a cold poll. With wake-ups on a clean network
// and a standby, the standby is woken: see wakeBound.
func (w *world) releaseBound(in *instance) time.Duration {
	poll, rho := w.pollAndDrift(in)
	if cold := w.coldPoll(in); cold > 0 && !w.hotStandbyBesides(in) {
		poll = cold
	}
	extra := time.Duration(0)
	if s := w.staleMax(); s > 0 {
		extra = s + w.rtt()
	}
	return trueSpan(poll, ppbOf(rho)) + 4*w.rtt() + extra + time.Millisecond
}

// wakeBound is I5's bound after a release that wakes a standby, with no
// wake-up lost or delayed: the leader's release (a round trip, its read
// of the standby record running alongside), the wake-up (one way), a
// read in flight when it arrives and the read after it, and the takeover.
func (w *world) wakeBound() time.Duration {
	w.chk.stats.WakeBounds++
	return 4*w.rtt() + w.store.lat.Bound() + time.Millisecond
}

// handoffBound is releaseBound, or wakeBound where a standby reads and
// wake-ups cross a clean network.
func (w *world) handoffBound(in *instance) time.Duration {
	if wf := w.plan.Wake; wf != nil && *wf == (wakeFaults{}) && w.hotStandbyBesides(in) {
		return w.wakeBound()
	}
	return w.releaseBound(in)
}

// standby returns the live instance that is the standby, or nil.
func (w *world) standby() *instance {
	for _, o := range w.liveInstances() {
		if f, ok := o.rt.(*fastRun); ok && f.hotStandby() {
			return o
		}
	}
	return nil
}

func (w *world) pollAndDrift(in *instance) (time.Duration, float64) {
	var poll time.Duration
	rho := in.timing.MaxDrift
	for _, o := range w.liveInstances() {
		if o != in {
			poll = max(poll, election.MaxPoll(o.timing.PollInterval))
			rho = max(rho, o.timing.MaxDrift)
		}
	}
	return poll, rho
}

func (w *world) rtt() time.Duration { return 2 * w.store.lat.Bound() }

// convergeBound is I5's bound after heal: requests still on the wire land,
// calls in flight time out and back off, and then a failover completes.
// With slow callbacks, a candidate whose term ended does not campaign until
// its OnElected and OnDemoted returned (the callback contract); when every
// candidate is in that state (two nodes, both demoted at the heal), the
// first takeover waits for the quicker of them as well.
func (w *world) convergeBound() time.Duration {
	var ttl, op, retry, poll time.Duration
	rho := 0.0
	for _, in := range w.liveInstances() {
		ttl = max(ttl, in.timing.LeaseDuration)
		op = max(op, in.timing.OpTimeout)
		retry = max(retry, in.timing.RetryMax)
		poll = max(poll, election.MaxPoll(in.timing.PollInterval))
		rho = max(rho, in.timing.MaxDrift)
	}
	ppb := ppbOf(rho)
	wire := max(w.store.lastArrival-w.now, 0)
	var held time.Duration
	if s := w.plan.Slow; s != nil {
		held = trueSpan(s.Cleanup+s.Demoted, ppb)
	}
	return wire + 2*op + retry + held + trueSpan(election.WaitBeforeTakeover(ttl, rho), ppb) + trueSpan(poll, ppb) + 4*w.rtt()
}

// expectLeader registers an I5 check: some term must begin within d.
func (w *world) expectLeader(d time.Duration, why string) {
	from := w.now
	w.at(from+d, nil, func() { w.chk.leaderSince(from, d, why) })
}

// expectConverged registers I5's check after heal: within d one leader
// emerges, and it keeps leading, seen by all, until the shutdown.
func (w *world) expectConverged(d time.Duration) {
	w.chk.convPending = true
	w.at(w.now+d, nil, w.chk.converged)
}

// endBrownout restores the store's planned behaviour, unless heal came first.
func (w *world) endBrownout() {
	w.fault("", "store brownout ends")
	if !w.healed {
		w.store.lat, w.store.f = w.plan.Latency, w.plan.Faults
	}
}

func (n *node) clockString(now time.Duration) string {
	mono := n.clk.mono(now)
	return fmt.Sprintf("monotonic %+v, wall %+v, drift %+dppm", (mono - now).Round(time.Millisecond), (mono + n.clk.wall - now).Round(time.Millisecond), n.clk.ppb/1000)
}

// timing returns the timings of a process on the node, every default
// filled in and checked.
func (s *nodeSpec) timing() election.Timing {
	t := s.Timing.WithDefaults()
	if err := t.Validate(); err != nil {
		panic(fmt.Sprintf("sim: node %s: %v", s.Name, err)) // scenarios are fixed code
	}
	return t
}

func (s *nodeSpec) maxDrift() float64 { return s.Timing.WithDefaults().MaxDrift }

// machineRand seeds an instance's Candidate: distinct per instance, the
// same in both tiers.
func (w *world) machineRand(in *instance) *rand.Rand {
	return rand.New(rand.NewPCG(w.seed, 0xa11ce+uint64(in.num)))
}
