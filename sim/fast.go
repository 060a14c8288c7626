package sim

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/standby"
)

// fastRun is the fast tier's instance: the driver that tenure.Candidate
// runs (internal/driver), with effects that stage on the simulator's queue
// what the Candidate's goroutines stage in the real tier, and single-
// threaded models of the Candidate's callback dispatcher and notifier
// running the sim's callbacks.
type fastRun struct {
	in *instance
	w  *world
	d  *driver.Driver
	m  driver.Machine

	req *request // the store call in flight, to abandon
	// The host's one timer, for the earliest of the lease's wake-up, its
	// release timer and the standby's wake-up.
	ht     hostTimer
	giveUp time.Time // the release timer; zero if none
	exited bool      // the loop returned; the deferred cleanup runs
	jeop   driver.Jeopardy
	term   *fastTerm
	disp   dispatcher
	notif  notifier
	dead   bool // crashed

	// With a standby (Timing.ColdPollInterval), as the Candidate's sbRun;
	// without (watch), a leader's reads of the standby record only
	// (standby.NewWatch), as every Candidate's.
	sb    *standby.Standby
	watch bool
	sbReq *request // its call in flight
	hot   bool     // what the campaign says
	cold  bool     // what the Machine was last told
	// The wake-up of the standby after a release (Plan.Wake): wakeTo is the
	// standby's ID as its record named it, once read; released, once the
	// release is confirmed.
	wakeTo           string
	waking, released bool
	quitWake         bool // the run ended without a confirmed release: no wake-up
	returned         bool // Run returned (finish)
	handing          bool // a hand-over has yet to give the lease back
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
	f := &fastRun{in: in, w: in.w, ht: hostTimer{in: in}}
	in.ht = &f.ht
	ec := election.Config{ID: in.ID, Timing: in.timing, Rand: in.w.machineRand(in), Wall: in.wallNow, StaleReads: in.w.plan.StaleReads}
	if in.w.opt.Strategy == Naive {
		f.m = newNaive(ec, in.wallNow)
	} else {
		m, err := election.New(ec)
		if err != nil {
			panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the timing passed Validate
		}
		f.m = m
	}
	f.d = driver.New(f.m, f, in.timing.ReleaseTimeout)
	f.disp.f = f
	f.notif.f = f
	if in.timing.ColdPollInterval > 0 {
		addr := ""
		if in.w.plan.Wake != nil {
			addr = in.ID // the address published: how a wake-up finds it here
		}
		sc := election.Config{ID: in.ID, Timing: election.StandbyTiming(in.timing), Rand: ec.Rand, Wall: in.wallNow}
		spec := in.node.spec
		f.priority = spec.Priority
		f.sb = standby.New((*fastSB)(f), leaseName, sc, addr, standby.Preference{Priority: spec.Priority, HoldOff: spec.priorityHoldOff(in.timing)})
	} else if in.w.opt.Strategy != Naive {
		// The baseline has no Candidate around it.
		sc := election.Config{ID: in.ID, Timing: election.StandbyTiming(in.timing.WithStandby()), Rand: ec.Rand, Wall: in.wallNow}
		f.sb = standby.NewWatch((*fastSB)(f), leaseName, sc, standby.Preference{HoldOff: in.node.spec.priorityHoldOff(in.timing)})
		f.watch, f.cold = true, true // never the standby; the Machine untold
	}
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
	if f.sb != nil && !f.watch {
		f.d.SetCold(true)
		f.cold = true
	}
	f.d.Start()
	f.loop()
}

func (f *fastRun) fire(tm *timer) {
	switch {
	case f.dead:
	case tm.fire == nil:
		f.wakeUp(tm)
	default:
		tm.fire()
	}
}

// wakeUp is the host's timer firing: as internal/host, it runs every
// entry due by now, in the heap's order (the earliest due first; the
// lease, then the standby, for one instant), and then the loop's end. It is a method, not a closure on
// the timer: one allocation fewer per wake-up, the fast tier's most
// frequent.
func (f *fastRun) wakeUp(tm *timer) {
	if f.exited || !f.ht.fired(tm) {
		return
	}
	now := f.now()
	for {
		la, sa := f.leaseDue(), time.Time{}
		if f.sb != nil {
			sa = f.sb.Due()
		}
		leaseDue, sbDue := !la.IsZero() && !now.Before(la), !sa.IsZero() && !now.Before(sa)
		if leaseDue && (!sbDue || !sa.Before(la)) {
			f.fireLease(now)
			continue
		}
		if sbDue {
			f.sb.Fire(now)
			continue
		}
		break
	}
	f.loop()
}

// leaseDue and fireLease are the Candidate's leaseEntry: the driver's
// wake-up and the release timer.
func (f *fastRun) leaseDue() time.Time {
	if f.d.Done() {
		return time.Time{}
	}
	d := f.d.Wake()
	if !f.giveUp.IsZero() && (d.IsZero() || f.giveUp.Before(d)) {
		d = f.giveUp
	}
	return d
}

func (f *fastRun) fireLease(now time.Time) {
	switch {
	case !f.giveUp.IsZero() && !now.Before(f.giveUp):
		f.giveUp = time.Time{}
		f.d.GiveUp()
	case !f.d.Wake().IsZero() && !now.Before(f.d.Wake()):
		f.d.Tick()
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
	if req.reg != nil {
		if req == f.sbReq {
			f.sbReq = nil
		}
		f.sb.Result(election.Result{ID: req.opID, Record: req.res.rec, Version: req.res.ver, Err: req.res.err})
		f.loop()
		return
	}
	if req == f.req {
		f.req = nil
	}
	_ = f.d.Result(election.Result{ID: req.opID, Record: req.res.rec, Version: req.res.ver, Err: req.res.err})
	f.loop()
}

func (f *fastRun) stop() {
	if f.dead || f.exited {
		return
	}
	if !f.watch {
		f.wakeAfterRelease()
	}
	f.d.Stop()
	if f.sb != nil {
		f.sb.Follow(false)
		f.sb.Lead(false)
	}
	f.loop()
}

// wakeAfterRelease reads the standby record now, to wake its holder once
// the lease is given back: with a standby at every release, without at a
// hand-over only (runner.planWake).
func (f *fastRun) wakeAfterRelease() {
	if f.sb != nil && f.term != nil && f.w.plan.Wake != nil && !f.waking {
		f.waking, f.released = true, false
		req := &request{in: f.in, kind: election.OpGet, reg: f.w.store.sb, wake: true}
		f.w.stage(item{in: f.in, src: srcStandby, kind: itRequest, req: req})
	}
}

// loop models the end of an iteration of the Candidate's loop (runner.after
// and the host's): the standby's hot or cold applied, the run's end, or the
// host's timer armed for the next iteration.
func (f *fastRun) loop() {
	if f.exited {
		return
	}
	if f.handing && !f.d.Resigning() {
		// Given back: the wake-up goes out (runner.after).
		f.handing = false
		if f.waking {
			f.released = true
			f.sendWake()
		}
	}
	if f.sb != nil {
		if cold := !f.hot; cold != f.cold {
			f.cold = cold
			f.hotStint(!cold)
			f.d.SetCold(cold)
		}
	}
	if f.d.Done() && (f.sb == nil || f.sb.Done()) {
		f.exit()
		if f.waking {
			// The run ends: the wake-up goes out if the lease was given
			// back; else its goroutine returns on quit.
			if f.d.GaveUp() {
				f.quitWake = true
				if f.wakeTo != "" {
					f.wakeTo, f.waking = "", false
					f.joined()
				}
			} else {
				f.released = true
				f.sendWake()
			}
		}
		return
	}
	f.arm()
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

// arm models the host's: its timer at the earliest Due of its entries,
// set anew when that instant changes.
func (f *fastRun) arm() {
	at := f.leaseDue()
	if f.sb != nil {
		if t := f.sb.Due(); !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	f.ht.set(at, f.req)
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
	f.w.sendWake(f.in, to, false, "")
	f.joined()
}

// noticed takes a renewal notice: the Machine rate-limits it.
func (f *fastRun) noticed() {
	if f.dead || f.exited {
		return
	}
	f.d.Notice()
	f.loop()
}

// woken takes a wake-up, within the rate limit.
func (f *fastRun) woken() {
	if f.dead || f.exited || f.sb == nil {
		return
	}
	if f.sb.AllowWake(f.now()) {
		f.w.chk.stats.WakesUsed++
		f.w.trace(f.in, line{what: mFault, text: "woken: reading the lease"})
		f.d.Hint()
	}
	f.loop()
}

// exit models run's deferred cleanup: cancel calls in flight, stop
// listening, let the dispatcher and the notifier drain, and return once
// they have.
func (f *fastRun) exit() {
	f.exited = true
	if f.sb != nil && !f.cold {
		f.hotStint(false)
	}
	f.abandon()
	f.ht.stop()
	f.disp.close()
	f.notif.close()
}

func (f *fastRun) abandon() {
	if f.req != nil {
		f.req.abandoned = true
		f.req = nil
		f.settleOwed()
	}
}

func (f *fastRun) settleOwed() {
	switch {
	case f.dead || f.exited:
		f.ht.owed = false
	case f.ht.owed:
		f.ht.check(f.req)
	}
}

// The driver.Effects of the fast tier.

func (f *fastRun) Now() time.Time { return f.now() }

func (f *fastRun) Cancel(uint64) { f.abandon() }

// Wake: the host reads the wake-up off the driver (leaseDue).
func (f *fastRun) Wake(time.Time) {}

func (f *fastRun) ReleaseTimer(d time.Duration) { f.giveUp = f.now().Add(d) }

func (f *fastRun) Send(op election.Op) {
	if op.Kind == election.OpGet && f.sb != nil && !f.cold {
		f.w.chk.stats.HotReads++
	}
	f.req = f.w.call(f.in, op, nil)
}

// release takes back a request none of whose events is left, unless its
// caller still waits on it (its answer was lost).
func (f *fastRun) release(r *request) {
	if r != f.req && r != f.sbReq {
		f.w.spareReqs = append(f.w.spareReqs, r)
	}
}

func (f *fastRun) Publish(s driver.Snapshot) {
	if s.Leading && f.term != nil {
		f.term.deadline = s.Term.Deadline
	}
	// Not traced: the real tier's trace must match this one line for line.
	if f.jeop.Update(f.now(), s); !f.jeop.Since().IsZero() && f.term != nil {
		f.term.jeopardy = true
	}
	if f.sb == nil {
		return
	}
	addr := f.sb.Renewed(s.Leading, s.Term.Deadline)
	if s.Leading && s.Term.Deadline.After(f.confirmed) {
		f.confirmed, f.noticeTo, f.noticeAt = s.Term.Deadline, addr, f.w.now
	}
	if addr != "" {
		f.w.sendWake(f.in, addr, true, "")
	}
}

func (f *fastRun) Elected(et election.Term) {
	if f.sb != nil {
		f.sb.Follow(false) // a leader is no standby
		f.sb.Lead(true)
	}
	t := &fastTerm{tok: uint64(et.Token), start: f.w.now}
	if _, ok := f.m.Term(); ok { // the naive baseline has no deadline to check
		t.deadline = et.Deadline
	}
	f.term = t
	f.w.stage(item{in: f.in, src: srcRunner, kind: itElected, tok: t.tok})
	f.disp.push(&job{kind: jElected, term: t})
}

func (f *fastRun) Demoted(et election.Term, r election.Reason) {
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
	if f.sb != nil {
		f.sb.Lead(false)
		if !f.d.Stopping() {
			f.sb.Follow(true)
		}
	}
}

func (f *fastRun) LeaderChanged(l election.Leader) {
	if f.sb != nil && l.Holder != "" && l.Holder != f.in.ID && !f.d.Stopping() {
		f.sb.Follow(true)
	}
	f.notif.push(l)
}

func (f *fastRun) Anomaly(error) { f.w.chk.stats.Anomalies++ }

func (f *fastRun) Barrier(b driver.Barrier) { f.disp.push(&job{kind: jBarrier, barrier: b}) }

// fastSB is the standby.Host of the fast tier.
type fastSB fastRun

func (s *fastSB) Now() time.Time { return (*fastRun)(s).now() }

func (s *fastSB) Call(op election.Op) {
	s.sbReq = s.w.call(s.in, op, s.w.store.sb)
}

func (s *fastSB) Cancel() {
	if s.sbReq != nil {
		s.sbReq.abandoned = true
		s.sbReq = nil
	}
}

func (s *fastSB) Log(slog.Level, string, ...any) {}
func (s *fastSB) Hot(hot bool)                   { s.hot = hot }
func (s *fastSB) Reschedule()                    {} // loop arms the timer

// HandOver is sbRun's: the wake-up planned, the driver's HandOver.
func (s *fastSB) HandOver(string, int) {
	f := (*fastRun)(s)
	if f.d.Stopping() {
		return
	}
	f.wakeAfterRelease()
	f.handing = true
	f.w.handingOver(f.in)
	f.d.HandOver(resignHoldOff(f.in.timing))
}

// hotStandby reports whether in is the standby, reading the lease at the
// hot cadence.
func (f *fastRun) hotStandby() bool { return f.sb != nil && !f.cold && !f.dead && !f.exited }

func (f *fastRun) crash() {
	if f.sb != nil && !f.cold && !f.exited {
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
