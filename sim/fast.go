package sim

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

// fastRun is the fast tier's Candidate: the production run below the API
// (internal/engine's Run: the lease's driver and release timer, the
// standby campaign or a leader's watch of its record, resigns, hand-overs)
// on the production host.Core (engineHost), with effects that stage on the
// simulator's queue what the Candidate's goroutines stage in the real tier,
// and single-threaded models of the Candidate's callback dispatcher and
// notifier running the sim's callbacks.
type fastRun struct {
	trusted  bool               // Options.trustFeed: a feed event came; take the lease at the next read
	feedWake lockcore.WakeLimit // releases the feed tells of (tenure's feedReleased)

	in  *instance
	w   *world
	eng *engineHost
	run *engine.Run
	d   *driver.Driver
	m   driver.Machine

	exited bool // the loop returned; the deferred cleanup runs
	jeop   driver.Jeopardy
	term   *fastTerm
	disp   dispatcher
	notif  notifier
	dead   bool // crashed

	// With a standby (Timing.ColdPollInterval): whether the Machine reads
	// at the cold cadence, as the run last said (Hot).
	hasSB bool
	cold  bool
	// The wake-up of the standby after a release (Plan.Wake): wakeTo is the
	// standby's ID as its record named it, once read; released, once the
	// release is confirmed.
	wakeTo           string
	waking, released bool
	quitWake         bool // the run ended without a confirmed release: no wake-up
	returned         bool // Run returned (finish)
	priority         int  // Config.Priority
	// Renewal notices (Plan.Wake), for noticeBound: the last confirmed
	// write's deadline, and where and when its notice went ("" if none).
	confirmed time.Time
	noticeTo  string
	noticeAt  time.Duration
	hotSince  time.Duration // true time the Machine was last told hot
}

// fastTerm models a term's context.
type fastTerm struct {
	tok       uint64
	cancelled bool
	deadline  time.Time     // the term context's own check (termContext.ended); zero: none
	start     time.Duration // true time of the election
	jeopardy  bool          // reported in jeopardy (driver.Jeopardy) at some point
}

// over models the term context's Done and Err: cancelled by the loop, or
// past its deadline by the clock.
func (f *fastRun) over(t *fastTerm) bool {
	return t.cancelled || !t.deadline.IsZero() && !f.now().Before(t.deadline)
}

func newFastRun(in *instance) instRuntime {
	f := &fastRun{in: in, w: in.w, eng: newEngineHost(in)}
	in.ht = &f.eng.ht
	f.eng.owes = owesLease
	f.eng.started = f.started
	ec := election.Config{ID: in.ID, Timing: in.timing, Rand: in.w.machineRand(in), Wall: in.wallNow, StaleReads: in.w.plan.StaleReads}
	if in.w.opt.Strategy == Naive {
		f.m = newNaive(ec, in.wallNow)
	} else {
		if in.w.opt.trustFeed {
			ec.Preempt = func(lease.Record) bool { return f.trusted }
		}
		m, err := election.New(ec)
		if err != nil {
			panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the timing passed Validate
		}
		f.m = m
	}
	spec := in.node.spec
	rc := engine.RunConfig{Lease: leaseName, ID: in.ID, ReleaseTimeout: in.timing.ReleaseTimeout, ResignHoldOff: resignHoldOff(in.timing),
		Preference: standby.Preference{Priority: spec.Priority, HoldOff: spec.priorityHoldOff(in.timing)}}
	if in.timing.ColdPollInterval > 0 {
		if in.w.plan.Wake != nil {
			rc.Addr = in.ID // the address published: how a wake-up finds it here
		}
		sc := election.Config{ID: in.ID, Timing: election.StandbyTiming(in.timing), Rand: ec.Rand, Wall: in.wallNow}
		rc.Standby, rc.StandbyConfig = true, &sc
		f.priority, f.hasSB, f.cold = spec.Priority, true, true
	} else if in.w.opt.Strategy != Naive {
		// The baseline has no Candidate around it.
		sc := election.Config{ID: in.ID, Timing: election.StandbyTiming(in.timing.WithStandby()), Rand: ec.Rand, Wall: in.wallNow}
		rc.Preference.Priority = 0
		rc.StandbyConfig = &sc
	}
	f.run = engine.NewRun(f.eng.core, (*runFx)(f), f.m, rc)
	f.d = f.run.Driver()
	f.disp.f = f
	f.notif.f = f
	return f
}

func (f *fastRun) now() time.Time { return f.in.local() }

func (f *fastRun) after(src source, d time.Duration, fn func()) *timer {
	tm := f.w.newTimer(f.in, src, d)
	tm.fire = fn
	return tm
}

// The loop's inputs, as the Candidate's select receives them.

func (f *fastRun) start() {
	f.run.Start()
	f.loop()
}

func (f *fastRun) fire(tm *timer) {
	switch {
	case f.dead:
	case tm.fire == nil:
		// The host's timer: every entry due by now, in the Core's order
		// (the earliest due first; for one instant the one first due:
		// the lease, then the standby), and then the loop's end.
		if !f.exited && f.eng.ht.fired(tm) {
			f.eng.core.Fire(f.now())
			f.loop()
		}
	default:
		tm.fire()
	}
}

func (f *fastRun) deliver(req *request) {
	if req.wake {
		f.wakeRead(req)
		return
	}
	if f.dead || f.exited {
		return // the call's goroutine gives up on quit
	}
	f.eng.deliverOnly(req)
	f.loop()
}

// started counts the Machine's reads at the hot cadence.
func (f *fastRun) started(fl *host.Flight) {
	if fl.Name() == leaseName && fl.Op().Kind == election.OpGet && f.hasSB && !f.cold {
		f.w.chk.stats.HotReads++
	}
}

func (f *fastRun) stop() {
	if f.dead || f.exited {
		return
	}
	f.run.Stop()
	f.loop()
}

// loop models the end of an iteration of the Candidate's loop (runner.after
// and the host's): the run settles the event (engine.Run.After), then
// the run ends or the host's timer is armed for the next iteration.
func (f *fastRun) loop() {
	if f.exited {
		return
	}
	if f.run.After() {
		f.exit()
		if f.waking && f.d.GaveUp() {
			// The run ends without the lease given back: the wake-up's
			// goroutine returns on quit.
			f.quitWake = true
			if f.wakeTo != "" {
				f.wakeTo, f.waking = "", false
				f.joined()
			}
		}
		return
	}
	f.eng.arm()
}

// hotStint counts the time the Machine reads at the hot cadence, from the
// instant it turns hot to the instant it turns cold or the run ends.
func (f *fastRun) hotStint(hot bool) {
	if hot {
		f.w.chk.stats.HotStints++
		f.hotSince = f.w.now
	} else {
		f.w.chk.stats.HotTime += f.w.now - f.hotSince
	}
}

// wakeRead takes the answer of the read of the standby record; the
// goroutine that made it outlives the loop, as in the Candidate.
func (f *fastRun) wakeRead(req *request) {
	if f.dead {
		return
	}
	rec := req.res.rec
	addr, _ := standby.Parse(rec.Payload)
	if f.quitWake || req.res.err != nil || rec.Released || rec.Holder == f.in.ID || addr == "" {
		f.waking = false
		f.joined() // Run waits for this read
		return
	}
	f.wakeTo = addr
	f.sendWake()
}

// sendWake sends the wake-up once the standby is known and the release
// confirmed.
func (f *fastRun) sendWake() {
	if f.wakeTo == "" || !f.released {
		return
	}
	to := f.wakeTo
	f.wakeTo, f.waking = "", false
	// From the goroutine that read the standby record, as the Candidate's.
	f.w.stage(item{in: f.in, src: srcWake, kind: itWake, s: to, msg: wakePrefix + leaseName})
	f.joined()
}

// noticed takes a renewal notice of version v (NoVersion: unknown): the
// Machine rate-limits it.
func (f *fastRun) noticed(v lease.Version) {
	if f.dead || f.exited {
		return
	}
	f.run.Noticed(v)
	f.loop()
}

// woken takes a wake-up, within the rate limit.
func (f *fastRun) woken() {
	if f.dead || f.exited {
		return
	}
	if f.run.Woken() {
		f.w.chk.stats.WakesUsed++
		f.w.trace(f.in, line{what: mFault, text: "woken: reading the lease"})
	}
	f.loop()
}

// exit models run's deferred cleanup: cancel the lease's call in flight,
// stop listening, let the dispatcher and the notifier drain, and return
// once they have.
func (f *fastRun) exit() {
	f.exited = true
	if f.hasSB && !f.cold {
		f.hotStint(false)
	}
	if r := f.eng.leaseCall(); r != nil {
		r.abandoned = true
	}
	f.eng.stop()
	f.eng.owes = owesNone
	f.disp.close()
	f.notif.close()
}

func (f *fastRun) settleOwed() {
	switch {
	case f.dead || f.exited:
		f.eng.ht.owed = false
	default:
		f.eng.settleOwed()
	}
}

func (f *fastRun) release(r *request) { f.eng.release(r) }

// runFx is the fast tier's engine.RunEffects: what tenure.Candidate's
// runner does, staged for the world.
type runFx fastRun

func (x *runFx) f() *fastRun { return (*fastRun)(x) }

func (x *runFx) Now() time.Time                 { return x.f().now() }
func (x *runFx) Log(slog.Level, string, ...any) {}

func (x *runFx) Publish(s driver.Snapshot, _ bool) {
	f := x.f()
	if s.Leading && f.term != nil {
		f.term.deadline = s.Term.Deadline
	}
	// Not traced: the real tier's trace must match this one line for line.
	if f.jeop.Update(f.now(), s); !f.jeop.Since().IsZero() && f.term != nil {
		f.term.jeopardy = true
	}
	if f.hasSB && s.Leading && s.Term.Deadline.After(f.confirmed) {
		f.confirmed, f.noticeTo, f.noticeAt = s.Term.Deadline, "", f.w.now // Notice follows at once, if it goes out
	}
}

func (x *runFx) Notice(addr string) {
	f := x.f()
	f.noticeTo = addr
	// From the listener's sender goroutine, as the Candidate's.
	f.w.stage(item{in: f.in, src: srcSend, kind: itWake, s: addr, msg: noticePrefix + leaseName})
}

func (x *runFx) Elected(et election.Term) {
	f := x.f()
	t := &fastTerm{tok: uint64(et.Token), start: f.w.now}
	if _, ok := f.m.Term(); ok { // the naive baseline has no deadline to check
		t.deadline = et.Deadline
	}
	f.term = t
	f.w.stage(item{in: f.in, src: srcRunner, kind: itElected, tok: t.tok})
	f.disp.push(&job{kind: jElected, term: t})
}

func (x *runFx) Demoted(et election.Term, r election.Reason) {
	f := x.f()
	t := f.term
	if t == nil {
		f.w.stage(item{in: f.in, src: srcRunner, kind: itViolation, inv: Callbacks, s: "EventDemoted without a term"})
		return
	}
	f.term = nil
	t.cancelled = true
	f.disp.cancelled(t)
	reason := tenure.DemotionReason(r).String()
	if (r == election.ReasonStoreUnavailable || r == election.ReasonExpired) && !t.jeopardy && !f.in.paused && f.in.resumedAt < t.start {
		f.w.stage(item{in: f.in, src: srcRunner, kind: itViolation, inv: Callbacks,
			s: "term " + strconv.FormatUint(t.tok, 10) + " ended for want of renewals (" + reason + ") and was never reported in jeopardy"})
	}
	f.w.stage(item{in: f.in, src: srcRunner, kind: itDemoted, tok: t.tok, s: reason, deadline: et.Deadline})
	f.disp.push(&job{kind: jDemoted, term: t, reason: reason})
}

func (x *runFx) LeaderChanged(l election.Leader) { x.f().notif.push(l) }

func (x *runFx) Anomaly(error) { x.w.chk.stats.Anomalies++ }

func (x *runFx) Barrier(b driver.Barrier) { x.f().disp.push(&job{kind: jBarrier, barrier: b}) }

// Hot: the Machine is told to read at the hot cadence, or the cold.
func (x *runFx) Hot(hot bool) {
	f := x.f()
	f.cold = !hot
	f.hotStint(hot)
}

func (x *runFx) HandOver(string, int) { x.w.handingOver(x.in) }

// PlanWake reads the standby record now, to wake its holder once the
// lease is given back (runner.PlanWake): with or without a wake-up
// network, since the leader cannot know whether its standby listens.
func (x *runFx) PlanWake() {
	f := x.f()
	if !f.waking {
		f.waking, f.released = true, false
		req := &request{in: f.in, kind: election.OpGet, reg: f.w.store.sb, wake: true}
		f.w.stage(item{in: f.in, src: srcWake, kind: itRequest, req: req})
	}
}

// WakeNow: the lease was given back; the wake-up goes out once the
// standby is known.
func (x *runFx) WakeNow() {
	f := x.f()
	if f.waking {
		f.released = true
		f.sendWake()
	}
}

// hotStandby reports whether in is the standby, reading the lease at the
// hot cadence.
func (f *fastRun) hotStandby() bool { return f.hasSB && !f.cold && !f.dead && !f.exited }

func (f *fastRun) prio() int { return f.priority }

// candidate is what the scenarios and the checker read of a Candidate's
// process, in either tier.
type candidate interface {
	hotStandby() bool // it is the standby, and live
	prio() int        // its Config.Priority
}

func (f *fastRun) crash() {
	if f.hasSB && !f.cold && !f.exited {
		f.hotStint(false)
	}
	f.dead = true
	f.in.finished = true
	f.w.running--
}

func (f *fastRun) observed() election.Leader { return f.m.Leader() }

func (f *fastRun) poll() {}

// finish models Run's return: the sim's goroutine that called Run reports it.
func (f *fastRun) finish() {
	s := ""
	if f.d.GaveUp() {
		s = "release not confirmed"
	}
	f.w.stage(item{in: f.in, src: srcRun, kind: itRunDone, s: s})
}

// dispatcher models callbacks.go's dispatcher running the sim's callbacks
// (realRun.callbacks): one job at a time, in order.
type dispatcher struct {
	f        *fastRun
	queue    []*job
	cur      *job
	running  bool // inside run: a push from a callback only queues
	closed   bool
	finished bool
}

type jobKind uint8

const (
	jElected jobKind = iota + 1
	jDemoted
	jBarrier
)

type job struct {
	kind    jobKind
	term    *fastTerm
	reason  string
	waiting bool           // jElected: waiting for the next round of work
	tm      *timer         // what it waits for
	barrier driver.Barrier // jBarrier
	// jElected: the rounds of the leader's work, made once a term rather
	// than a closure each round.
	check, act func()
}

func (d *dispatcher) push(j *job) {
	d.queue = append(d.queue, j)
	d.run()
}

func (d *dispatcher) close() {
	d.closed = true
	d.run()
}

func (d *dispatcher) run() {
	if d.running {
		return
	}
	d.running = true
	for d.cur == nil && len(d.queue) > 0 {
		j := d.queue[0]
		d.queue[0] = nil
		d.queue = d.queue[1:]
		d.cur = j
		d.begin(j)
	}
	d.running = false
	if d.cur == nil && d.closed && !d.finished {
		d.finished = true
		d.f.joined()
	}
}

// joined models wg.Wait in run's cleanup: Run returns once the dispatcher
// and the notifier have both returned.
//
// With a wake-up planned it waits for that goroutine too: the read of the
// standby record and the send.
func (f *fastRun) joined() {
	if f.exited && f.disp.finished && f.notif.finished && !f.waking && !f.returned {
		f.returned = true
		f.finish()
	}
}

// next ends the current job and runs the following ones.
func (d *dispatcher) next() {
	d.cur = nil
	d.run()
}

func (d *dispatcher) begin(j *job) {
	f := d.f
	in := f.in
	switch j.kind {
	case jElected:
		f.w.stage(item{in: in, src: srcCallbacks, kind: itCbElected, tok: j.term.tok})
		d.workLoop(j)
	case jDemoted:
		f.w.stage(item{in: in, src: srcCallbacks, kind: itCbDemoted, tok: j.term.tok, s: j.reason, flag: j.term.cancelled})
		done := func() {
			f.w.stage(item{in: in, src: srcCallbacks, kind: itCbDemotedDone})
			d.next()
		}
		if dur := in.slow(slowDemoted); dur > 0 {
			j.tm = f.after(srcCallbacks, dur, done)
		} else {
			done()
		}
	case jBarrier:
		f.d.Reached(j.barrier)
		f.loop()
		d.next()
	}
}

// workLoop models the top of OnElected's loop: a select on the term's
// context and a timer for the next round, the timer created either way.
func (d *dispatcher) workLoop(j *job) {
	f := d.f
	if j.check == nil {
		j.check = func() { d.check(j) }
		j.act = func() {
			f.w.stage(item{in: f.in, src: srcCallbacks, kind: itWrite, tok: j.term.tok})
			d.workLoop(j)
		}
	}
	tm := f.after(srcCallbacks, f.w.plan.Work, j.check)
	if f.over(j.term) {
		tm.dead = true
		d.cleanup(j)
		return
	}
	j.tm, j.waiting = tm, true
}

// cancelled: the term's context is done; OnElected leaves its select.
func (d *dispatcher) cancelled(t *fastTerm) {
	if j := d.cur; j != nil && j.kind == jElected && j.term == t && j.waiting {
		j.tm.dead = true
		d.cleanup(j)
	}
}

func (d *dispatcher) check(j *job) {
	f := d.f
	j.waiting = false
	if f.over(j.term) { // ctx.Err() after the timer: the clock is past the deadline
		d.cleanup(j)
		return
	}
	f.w.stage(item{in: f.in, src: srcCallbacks, kind: itCheck, tok: j.term.tok})
	j.tm = f.after(srcCallbacks, f.w.plan.Act, j.act)
}

func (d *dispatcher) cleanup(j *job) {
	j.waiting = false
	f := d.f
	if dur := f.in.slow(slowCleanup); dur > 0 {
		j.tm = f.after(srcCallbacks, dur, func() { d.returned() })
		return
	}
	d.returned()
}

func (d *dispatcher) returned() {
	d.f.w.stage(item{in: d.f.in, src: srcCallbacks, kind: itCbReturn})
	d.next()
}

// notifier models callbacks.go's notifier running the sim's OnLeaderChange
// on a goroutine of its own: one call at a time, and a change that comes
// while one runs replaces any still waiting.
type notifier struct {
	f        *fastRun
	running  bool
	pending  *election.Leader
	closed   bool
	finished bool
}

func (n *notifier) push(l election.Leader) {
	if n.running {
		n.pending = &l
		return
	}
	n.begin(l)
}

func (n *notifier) begin(l election.Leader) {
	f := n.f
	n.running = true
	f.w.stage(item{in: f.in, src: srcLeader, kind: itCbLeader, tok: uint64(l.Token), s: l.Holder})
	if dur := f.in.slow(slowLeader); dur > 0 {
		f.after(srcLeader, dur, n.returned)
		return
	}
	n.returned()
}

func (n *notifier) returned() {
	n.running = false
	if l := n.pending; l != nil {
		n.pending = nil
		n.begin(*l)
		return
	}
	n.idle()
}

func (n *notifier) close() {
	n.closed = true
	if !n.running {
		n.idle()
	}
}

func (n *notifier) idle() {
	if n.closed && !n.finished {
		n.finished = true
		n.f.joined()
	}
}
