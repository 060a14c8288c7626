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

// Locks in the simulator. A lock scenario runs clients on its nodes, each
// a process that takes locks one at a time with the code of
// tenure.Locker's locks (internal/lockcore, under the shared driver):
// think, call TryLock or Lock (Fair or not) with a deadline, hold the lock
// for a while, unlock, and again. The store is a linearizable map of
// compare-and-swap registers (each lock and each lock's queue), reached
// over the same seeded latency as the leadership scenarios; nodes crash,
// pause, lose the store and drift.
//
// The checker holds the clients to:
//
//   - I1, mutual exclusion in belief: at any true instant at most one
//     process believes it holds a lock. A holder believes from the grant
//     until its term ends or its own clock reaches the term's deadline
//     (when its lock's context is done), whichever is first; a crash ends
//     it.
//   - I2: each grant of a lock has a token above every earlier grant's.
//   - I5, bounded wait: every call is answered (the lock, or an error) by
//     its deadline plus one OpTimeout on its own clock, unless its process
//     was paused meanwhile.
//   - I6: every process's locks are over by the end of the shutdown.
//   - I7, fair order: see FairOrder.

// lockPlan is what a lock scenario's clients do.
type lockPlan struct {
	Names    int              // locks contended: lock/0, lock/1, ...
	Fair     bool             // Lock calls wait in turn (Fair)
	TryOneIn int              // one call in TryOneIn is a TryLock; 0: none
	Wait     [2]time.Duration // each call's deadline, drawn in this range
	Hold     [2]time.Duration // how long a granted lock is held
	Think    [2]time.Duration // between a lock's end and the next call
}

// lockScenario makes a scenario whose nodes run lock clients, starting
// from n nodes with defaults that build changes.
func lockScenario(name, summary string, n int, build func(p *plan, lp *lockPlan, r *rand.Rand)) *Scenario {
	return &Scenario{Name: name, Summary: summary, locks: true, build: func(p *plan, r *rand.Rand) {
		p.Nodes = p.Nodes[:0]
		for i := range n {
			p.Nodes = append(p.Nodes, newNodeSpec(r, "n"+strconv.Itoa(i)))
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

// lat schedules f at true time t of a lock run.
func (p *plan) lat(t time.Duration, f func(w *lockWorld)) {
	p.lockActions = append(p.lockActions, lockAction{at: t, f: f})
}

type lockAction struct {
	at time.Duration
	f  func(w *lockWorld)
}

// lockWorld is one run of a lock scenario.
type lockWorld struct {
	sc     *Scenario
	plan   *plan
	lp     *lockPlan
	opt    Options
	seed   uint64
	rng    *rand.Rand // the store's draws: latency and faults
	now    time.Duration
	seq    uint64
	q      timeHeap[*lockEvent]
	events int64

	lockNames, queueNames []string // each lock's record, and its queue's
	spare                 []*lreq  // requests done with, for reuse
	ending                bool

	nodes []*lnode
	regs  []*lregister // each lock's, then its queue's: 2i and 2i+1; nil until written
	verN  int

	// The checker's state.
	holders map[string][]*lproc // believers, per lock
	maxTok  map[string]uint64   // highest token granted, per lock
	waiting []*lproc            // processes with a call not yet answered
	counts  [numInvariants + 1]int
	viol    []Violation
	stats   Stats
	hash    uint64
	lines   int64
	buf     []byte
}

type lregister struct {
	rec lease.Record
	ver lease.Version
}

type lnode struct {
	w      *lockWorld
	spec   *nodeSpec
	clk    clock
	timing election.Timing
	rng    *rand.Rand // the client program's draws
	mrng   *rand.Rand // the Machines' draws
	cut    bool
	paused bool
	held   []*lockEvent // events that reached it while paused
	p      *lproc       // the running process; nil after a crash
	incs   int
}

// lproc is one process on a node: one lock at a time.
type lproc struct {
	n    *lnode
	id   string
	dead bool

	lk        *lockcore.Lock // the current call's lock; nil between calls
	name      string
	qname     string // its fair queue's record
	li        int    // the lock's index: lock/li
	try       bool
	fair      bool
	asked     time.Time // local time of the call
	bound     time.Time // local time by which it must be answered
	paused    bool      // its process paused during the call
	upset     bool      // paused, cut off or refused by the store since the call
	ticket    uint64    // last confirmed ticket of a fair call
	lockReq   *lreq     // the lock call in flight
	queueReq  *lreq     // the last queue call; it may be done, or reused by another
	wake      *lockEvent
	spareWake *lockEvent
	owed      bool // a wake-up put off: a call's next event comes first, and reschedules

	believing bool
	token     uint64
	deadline  time.Time // zero: none to check (the naive baseline)
}

type lreq struct {
	p         *lproc
	lk        *lockcore.Lock
	name      string
	reg       int // its record: w.regs[reg]
	op        election.Op
	res       election.Result // the store's answer, on its way back
	queue     bool
	abandoned bool          // the lock call was cancelled
	done      bool          // a queue call was answered (or timed out)
	timeoutAt time.Duration // a queue call's timeout, in true time; never: none
	pending   int32         // its events in the queue or held: reused once none is

	// Its events, in it rather than allocated each with a closure: the
	// arrival at the store, the answer's return, and a queue call's
	// timeout.
	arriveEv, answerEv, timeoutEv lockEvent
}

type lockEvent struct {
	at   time.Duration
	seq  uint64
	n    *lnode // held while it is paused; nil: the world's
	p    *lproc // dropped once it is dead
	f    func() // lkFunc
	r    *lreq  // the other kinds
	kind lkKind
	off  bool      // cancelled
	in   bool      // in the queue
	due  time.Time // lkWake: the local time it was set for
}

// lkKind says what a lockEvent does.
type lkKind uint8

const (
	lkFunc    lkKind = iota // f
	lkArrive                // r reaches the store
	lkAnswer                // r's answer reaches its process
	lkTimeout               // r, a queue call, times out
	lkWake                  // p's lock's timer (Reschedule)
)

func (w *lockWorld) push(e *lockEvent) *lockEvent {
	w.seq++
	e.seq = w.seq
	e.in = true
	if e.r != nil {
		e.r.pending++
	}
	w.q.push(e.at, e.seq, e)
	return e
}

// runLocks is Run for a lock scenario.
func runLocks(sc *Scenario, seed uint64, opt Options) *Result {
	start := time.Now()
	p := sc.plan(seed)
	w := &lockWorld{sc: sc, plan: p, lp: p.Locks, opt: opt, seed: seed,
		rng:  rand.New(rand.NewPCG(seed, 0x6c6f636b)),
		regs: make([]*lregister, 2*p.Locks.Names), holders: map[string][]*lproc{}, maxTok: map[string]uint64{}}
	for i := range p.Locks.Names {
		w.lockNames = append(w.lockNames, "lock/"+strconv.Itoa(i))
		w.queueNames = append(w.queueNames, "lock/"+strconv.Itoa(i)+lockcore.QueueSuffix)
	}
	w.hash = 0x9e3779b97f4a7c15
	for i, spec := range p.Nodes {
		n := &lnode{w: w, spec: spec, timing: spec.Timing.WithDefaults(),
			clk:  clock{l0: spec.MonoOffset, ppb: spec.PPB, wall: spec.WallOffset},
			rng:  rand.New(rand.NewPCG(seed, uint64(2*i+1))),
			mrng: rand.New(rand.NewPCG(seed, uint64(2*i+2)))}
		w.nodes = append(w.nodes, n)
		if spec.Start >= 0 {
			w.push(&lockEvent{at: spec.Start, f: func() { n.boot() }})
		}
	}
	for _, a := range p.lockActions {
		w.push(&lockEvent{at: a.at, f: func() { a.f(w) }})
	}
	w.push(&lockEvent{at: p.Duration, f: w.shutdown})
	for w.q.len() > 0 {
		e := w.q.pop()
		e.in = false
		if e.at > p.Duration+endCap {
			break
		}
		w.now = e.at
		if w.fire(e) {
			continue // held: its request still waits on it
		}
		if r := e.r; r != nil {
			if p := r.p; p.owed && !p.dead && p.lk != nil {
				p.Reschedule() // the wake-up it put off
			}
			if r.pending--; r.pending == 0 && r.p.lockReq != r {
				w.spare = append(w.spare, r)
			}
		}
	}
	w.finish()
	return &Result{Scenario: sc.Name, Seed: seed, Tier: "fast", Options: Options{Strategy: opt.Strategy, Resource: opt.Resource},
		Requires: p.Requires, Counts: w.counts, Violations: w.viol, Stats: w.stats,
		SimTime: w.now, Wall: time.Since(start), Events: w.events, Lines: w.lines, Hash: w.hash}
}

// fire runs e; it reports whether e's node, paused, held it.
func (w *lockWorld) fire(e *lockEvent) (held bool) {
	switch {
	case e.off, e.p != nil && e.p.dead:
		return false
	case e.n != nil && e.n.paused:
		e.n.held = append(e.n.held, e)
		return true
	}
	w.events++
	switch e.kind {
	case lkFunc:
		e.f()
	case lkArrive:
		w.arrive(e.r)
	case lkAnswer:
		if e.n.cut {
			w.stats.Dropped++
			w.timeout(e.r)
			return false
		}
		w.deliver(e.r, e.r.res)
	case lkTimeout:
		r, p := e.r, e.r.p
		if !r.done && p.lk == r.lk {
			r.done, p.upset = true, true
			r.lk.QueueResult(election.Result{Err: election.ErrTimeout}, r.op.Kind == election.OpPut)
			p.noteTicket()
		}
	case lkWake:
		if p := e.p; p.wake == e {
			p.wake = nil
			p.lk.Fire(p.n.local())
		}
		if p := e.p; p.wake != e {
			p.spareWake = e // done with: the next wake-up reuses it
		}
	}
	return false
}

// trace adds a line to the run's trace (and its hash).
func (w *lockWorld) trace(who, format string, args ...any) {
	w.emit(fmt.Appendf(w.begin(who), format, args...))
}

// traceS is trace for a line of plain strings: the frequent lines, made
// without fmt.
func (w *lockWorld) traceS(who string, parts ...string) {
	b := w.begin(who)
	for _, s := range parts {
		b = append(b, s...)
	}
	w.emit(b)
}

// begin starts a line in w's buffer; emit ends it, hashes it and writes it
// out if a trace was asked for.
func (w *lockWorld) begin(who string) []byte {
	b := appendTime(w.buf[:0], w.now)
	b = append(b, ' ')
	b = append(b, who...)
	return append(b, ' ')
}

func (w *lockWorld) emit(b []byte) {
	b = append(b, '\n')
	w.buf = b
	w.lines++
	w.hash = mixString(w.hash, b)
	if w.opt.Trace != nil {
		_, _ = w.opt.Trace.Write(b)
	}
}

func (w *lockWorld) violate(inv Invariant, msg string) {
	w.counts[inv]++
	if len(w.viol) < maxKept {
		w.viol = append(w.viol, Violation{Inv: inv, At: w.now, Msg: msg})
	}
	w.trace("checker", "VIOLATION %v %s", inv, msg)
}

// Nodes and processes.

func (n *lnode) local() time.Time { return n.clk.localAt(n.w.now) }

func (n *lnode) wall() time.Time {
	return localEpoch.Add(n.clk.mono(n.w.now) + n.clk.wall)
}

// at schedules f for p at local time t of its node's clock.
func (p *lproc) at(t time.Time, f func()) *lockEvent {
	return p.atEv(t, &lockEvent{n: p.n, p: p, f: f})
}

// atEv schedules e, of p, at local time t of its node's clock.
func (p *lproc) atEv(t time.Time, e *lockEvent) *lockEvent {
	n := p.n
	at := n.clk.trueAt(n.w.now, sinceEpoch(t))
	if at == never {
		return nil
	}
	e.at = at
	return n.w.push(e)
}

func (n *lnode) boot() {
	if n.p != nil || n.w.ending {
		return
	}
	n.incs++
	n.p = &lproc{n: n, id: n.spec.Name + "-" + strconv.Itoa(n.incs)}
	n.w.traceS(n.p.id, "start")
	n.p.think()
}

func (n *lnode) crash() {
	p := n.p
	if p == nil {
		return
	}
	n.w.stats.Crashes++
	n.w.traceS(p.id, "crash")
	p.dead, p.believing = true, false
	n.w.drop(p)
	n.p = nil
}

func (n *lnode) pause() {
	if n.paused {
		return
	}
	n.w.stats.Pauses++
	n.paused = true
	if p := n.p; p != nil {
		n.w.traceS(p.id, "pause")
		p.paused, p.upset = true, true
	}
}

func (n *lnode) resume() {
	if !n.paused {
		return
	}
	n.paused = false
	if n.p != nil {
		n.w.traceS(n.p.id, "resume")
	}
	held := n.held
	n.held = nil
	for _, e := range held { // overdue: now, in their order
		e.at = n.w.now
		if e.r != nil {
			e.r.pending-- // push counts it again
		}
		n.w.push(e)
	}
}

func (n *lnode) setCut(cut bool) {
	n.cut = cut
	if p := n.p; p != nil {
		n.w.trace(p.id, "cut %v", cut)
		if cut {
			p.upset = true
		}
	}
}

// think waits, then makes the next call.
func (p *lproc) think() {
	lp := p.n.w.lp
	p.at(p.n.local().Add(uniform(p.n.rng, lp.Think[0], lp.Think[1])), p.call)
}

func (p *lproc) call() {
	w, n, lp := p.n.w, p.n, p.n.w.lp
	if w.ending {
		return
	}
	i := n.rng.IntN(lp.Names)
	p.name, p.qname, p.li = w.lockNames[i], w.queueNames[i], i
	p.try = lp.TryOneIn > 0 && n.rng.IntN(lp.TryOneIn) == 0
	p.fair = lp.Fair && !p.try
	p.asked = n.local()
	wait := uniform(n.rng, lp.Wait[0], lp.Wait[1])
	p.bound = p.asked.Add(wait + n.timing.OpTimeout)
	p.paused, p.upset, p.ticket = n.paused, n.cut, 0
	kind := "Lock"
	if p.try {
		kind = "TryLock"
	} else if p.fair {
		kind = "Lock(Fair)"
	}
	w.traceS(p.id, kind, " ", p.name, " within ", wait.String())
	lk := new(lockcore.Lock)
	p.lk = lk
	cfg := election.Config{ID: p.id, Timing: n.timing, Rand: n.mrng, Wall: n.wall}
	if w.opt.Strategy == Naive {
		lk.InitMachine(p, p.name, newNaive(cfg, n.wall), p.try, p.fair)
	} else if err := lk.Init(p, p.name, &cfg, p.try, p.fair); err != nil {
		panic(fmt.Sprintf("sim: %s: %v", p.id, err)) // the timing passed Validate
	}
	w.waiting = append(w.waiting, p)
	p.at(p.asked.Add(wait), func() { // the caller's context is done
		if p.lk == lk && lk.Answer() {
			p.answered("gave up")
			lk.Stop()
		}
	})
	lk.Start()
}

// answered checks the answer's time against the call's deadline (I5).
func (p *lproc) answered(what string) {
	w := p.n.w
	w.traceS(p.id, p.name, ": ", what)
	if i := slices.Index(w.waiting, p); i >= 0 {
		w.waiting = slices.Delete(w.waiting, i, i+1)
	}
	if !p.paused && p.n.local().After(p.bound) {
		w.violate(Liveness, fmt.Sprintf("%s's call for %s was answered (%s) %v after its deadline and an OpTimeout",
			p.id, p.name, what, p.n.local().Sub(p.bound)))
	}
}

// drop forgets p's belief and its waiting call: it crashed.
func (w *lockWorld) drop(p *lproc) {
	for name, hs := range w.holders {
		w.holders[name] = slices.DeleteFunc(hs, func(h *lproc) bool { return h == p })
	}
	if i := slices.Index(w.waiting, p); i >= 0 {
		w.waiting = slices.Delete(w.waiting, i, i+1)
	}
}

// believes reports whether p still believes it holds its lock.
func (p *lproc) believes() bool {
	return p.believing && !p.dead && (p.deadline.IsZero() || p.n.local().Before(p.deadline))
}

// unbelieve ends p's belief: its term ended, or its lock is over.
func (p *lproc) unbelieve() {
	p.believing = false
	w := p.n.w
	w.holders[p.name] = slices.DeleteFunc(w.holders[p.name], func(h *lproc) bool { return h == p })
}

// The lockcore.Host of a process's current lock.

func (p *lproc) Now() time.Time { return p.n.local() }

func (p *lproc) Call(op election.Op, queue bool) {
	w := p.n.w
	name := p.name
	if queue {
		name = p.qname
	}
	if op.Kind == election.OpPut && op.Record.WrittenAt.IsZero() {
		op.Record.WrittenAt = p.n.local().Round(0).UTC()
	}
	var r *lreq
	if n := len(w.spare); n > 0 {
		r, w.spare = w.spare[n-1], w.spare[:n-1]
	} else {
		r = new(lreq)
	}
	*r = lreq{p: p, lk: p.lk, name: name, reg: 2 * p.li, op: op, queue: queue, timeoutAt: never}
	if queue {
		r.reg++
	}
	if queue { // the call's context times out
		r.timeoutEv = lockEvent{n: p.n, p: p, r: r, kind: lkTimeout}
		r.timeoutAt = p.n.clk.trueAt(w.now, sinceEpoch(p.n.local().Add(p.n.timing.OpTimeout)))
		p.queueReq = r
	} else {
		p.lockReq = r
	}
	w.stats.Requests++
	if p.n.cut {
		w.stats.Dropped++
		w.timeout(r)
		return
	}
	r.arriveEv = lockEvent{at: w.now + p.n.w.plan.Latency.draw(w.rng), r: r, kind: lkArrive}
	if r.arriveEv.at >= r.timeoutAt {
		w.timeout(r)
	}
	w.push(&r.arriveEv)
}

// timeout schedules r's timeout, if it has one. It is scheduled only once
// the answer is known not to come first (lost, or later): most answers
// come in a millisecond, and their timeouts would only wait in the queue.
func (w *lockWorld) timeout(r *lreq) {
	if r.timeoutAt != never {
		r.timeoutEv.at = max(r.timeoutAt, w.now)
		r.timeoutAt = never
		w.push(&r.timeoutEv)
	}
}

func (p *lproc) Cancel() {
	if p.lockReq != nil {
		p.lockReq.abandoned = true
		p.lockReq = nil
	}
}

func (p *lproc) Log(slog.Level, string, ...any) {}

func (p *lproc) Granted(t election.Term) {
	w := p.n.w
	w.stats.Terms++
	p.answered("granted, token " + strconv.FormatUint(t.Token, 10))
	for _, h := range w.holders[p.name] {
		if h != p && h.believes() {
			w.violate(OneLeader, fmt.Sprintf("%s is granted %s (token %d) while %s believes it holds it (token %d)",
				p.id, p.name, t.Token, h.id, h.token))
		}
	}
	w.holders[p.name] = append(slices.DeleteFunc(w.holders[p.name], func(h *lproc) bool { return !h.believes() }), p)
	if t.Token <= w.maxTok[p.name] {
		w.violate(Tokens, fmt.Sprintf("%s is granted %s with token %d, not above %d granted before", p.id, p.name, t.Token, w.maxTok[p.name]))
	}
	w.maxTok[p.name] = max(w.maxTok[p.name], t.Token)
	if p.fair && p.ticket != 0 {
		for _, q := range w.waiting {
			if q != p && q.fair && q.name == p.name && !q.upset && q.ticket != 0 && q.ticket < p.ticket {
				w.violate(FairOrder, fmt.Sprintf("%s is granted %s with ticket %d while %s waits, live, with ticket %d",
					p.id, p.name, p.ticket, q.id, q.ticket))
			}
		}
	}
	p.believing, p.token = true, t.Token
	p.deadline = time.Time{}
	if w.opt.Strategy != Naive {
		p.deadline = t.Deadline
	}
	lk := p.lk
	p.at(p.n.local().Add(uniform(p.n.rng, w.lp.Hold[0], w.lp.Hold[1])), func() {
		if p.lk == lk {
			w.traceS(p.id, "unlock ", p.name)
			lk.Stop()
		}
	})
}

func (p *lproc) Busy(l election.Leader) {
	p.answered("locked by " + l.Holder + " (token " + strconv.FormatUint(l.Token, 10) + ")")
}

func (p *lproc) Refused(err error) { p.answered("refused: " + err.Error()) }

func (p *lproc) Publish(s driver.Snapshot) {
	if s.Leading && p.believes() && p.n.w.opt.Strategy != Naive {
		p.deadline = s.Term.Deadline
	}
}

func (p *lproc) Ended(t election.Term, r election.Reason) {
	p.n.w.traceS(p.id, p.name, " ended: ", r.String())
	p.unbelieve()
}

// Reschedule sets the wake-up of p's lock to its Due. It puts it off while
// one of p's calls has an event before it (its arrival at the store, its
// answer, or its timeout): most wake-ups set while a call is in flight are
// its timeout, replaced once it is answered, a millisecond later. That
// event reschedules again once it has run.
func (p *lproc) Reschedule() {
	due := p.lk.Due()
	p.owed = false
	if p.wake != nil && p.wake.due.Equal(due) {
		return // it stands
	}
	if p.wake != nil {
		p.wake.off = true
		p.wake = nil
	}
	if due.IsZero() {
		return
	}
	n := p.n
	at := n.clk.trueAt(n.w.now, sinceEpoch(due))
	if at == never {
		return
	}
	if p.callBefore(p.lockReq, at) || p.callBefore(p.queueReq, at) {
		p.owed = true
		return
	}
	e := p.spareWake
	if e == nil {
		e = new(lockEvent)
	}
	p.spareWake = nil
	*e = lockEvent{at: at, n: n, p: p, kind: lkWake, due: due}
	p.wake = n.w.push(e)
}

// callBefore reports whether r, a call of p, has an event in the queue
// before true time t.
func (p *lproc) callBefore(r *lreq, t time.Duration) bool {
	if r == nil || r.p != p {
		return false
	}
	for _, e := range [...]*lockEvent{&r.arriveEv, &r.answerEv, &r.timeoutEv} {
		if e.in && e.at < t {
			return true
		}
	}
	return false
}

func (p *lproc) Retired() {
	p.n.w.traceS(p.id, p.name, " over")
	p.unbelieve()
	p.lk, p.lockReq, p.owed = nil, nil, false
	if p.wake != nil {
		p.wake.off = true
		p.wake = nil
	}
	p.think()
}

// The store.

func (w *lockWorld) arrive(r *lreq) {
	var res election.Result
	res.ID = r.op.ID
	switch {
	case chance(w.rng, w.plan.Faults.ErrorPPM):
		w.stats.Errors++
		res.Err = fmt.Errorf("%s: %w", r.name, ErrUnavailable)
	case r.op.Kind == election.OpGet:
		if g := w.regs[r.reg]; g != nil {
			res.Record, res.Version = g.rec, g.ver
		} else {
			res.Err = fmt.Errorf("%s: %w", r.name, lease.ErrNotFound)
		}
	default:
		res = w.put(r)
	}
	r.res = res
	r.answerEv = lockEvent{at: w.now + w.plan.Latency.draw(w.rng), n: r.p.n, p: r.p, r: r, kind: lkAnswer}
	if r.answerEv.at >= r.timeoutAt {
		w.timeout(r)
	}
	w.push(&r.answerEv)
}

func (w *lockWorld) put(r *lreq) election.Result {
	rec := r.op.Record
	res := election.Result{ID: r.op.ID, Record: rec}
	if err := rec.Validate(r.name); err != nil {
		w.violate(Tokens, fmt.Sprintf("%s wrote an invalid record to %s: %v", r.p.id, r.name, err))
		res.Err = err
		return res
	}
	g := w.regs[r.reg]
	if g == nil && r.op.Expect != lease.NoVersion || g != nil && g.ver != r.op.Expect {
		w.stats.Conflicts++
		ce := &lease.ConflictError{Name: r.name}
		if g != nil {
			ce.Current, ce.Version, ce.Found = g.rec, g.ver, true
		}
		res.Err = ce
		return res
	}
	if g == nil {
		g = &lregister{}
		w.regs[r.reg] = g
	}
	w.verN++
	g.rec, g.ver = rec, lease.Version(strconv.Itoa(w.verN))
	if r.queue {
		b := append(w.begin(r.p.id), "queue "...)
		b = append(append(b, r.name...), ": "...)
		w.emit(append(b, rec.Payload...))
	}
	res.Version = g.ver
	if rec.Released {
		w.stats.Releases++
	}
	return res
}

func (w *lockWorld) deliver(r *lreq, res election.Result) {
	p := r.p
	if p.lk != r.lk {
		return // the call's lock is over
	}
	if !r.queue {
		if r.abandoned {
			return
		}
		p.lockReq = nil
		p.lk.Result(res)
		return
	}
	if r.done {
		return
	}
	r.done = true
	if res.Err != nil && !errors.Is(res.Err, lease.ErrConflict) && !errors.Is(res.Err, lease.ErrNotFound) {
		p.upset = true
	}
	p.lk.QueueResult(res, r.op.Kind == election.OpPut)
	p.noteTicket()
}

// noteTicket keeps the ticket of p's lock once the queue's answer shows it.
func (p *lproc) noteTicket() {
	if p.lk != nil {
		if t := p.lk.Ticket(); t != 0 {
			p.ticket = t
		}
	}
}

// shutdown stops every call at the planned end; finish checks that every
// lock is over (I6) and that no call was left unanswered.
func (w *lockWorld) shutdown() {
	w.ending = true
	w.traceS("world", "shutdown")
	for _, n := range w.nodes {
		n.setCut(false)
		n.resume()
		if p := n.p; p != nil && p.lk != nil {
			if p.lk.Answer() {
				p.answered("shut down")
			}
			p.lk.Stop()
		}
	}
}

func (w *lockWorld) finish() {
	for _, n := range w.nodes {
		if p := n.p; p != nil && p.lk != nil {
			w.violate(Goroutines, fmt.Sprintf("%s's lock %s is not over %v after the shutdown", p.id, p.name, endCap))
		}
	}
}
