package sim

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
)

// strategy is the decision logic an instance runs: *election.Machine, or the
// naive baseline.
type strategy interface {
	Start(now time.Time) election.Output
	Tick(now time.Time) election.Output
	Done(now time.Time, res election.Result) election.Output
	Stop(now time.Time) election.Output
	Release(now time.Time) election.Output
	CallbacksDone(now time.Time) election.Output
	Leader() election.Leader
	Term() (election.Term, bool)
}

// fastRun is the fast tier's instance: a single-threaded model of
// tenure.Candidate's runner (candidate.go) and callback dispatcher
// (callbacks.go) around a strategy, step for step, so that it stages the
// same items, timers and requests as the real Candidate does, in the same
// order within each source. Each field names the runner field it models.
type fastRun struct {
	in *instance
	w  *world
	m  strategy

	op   uint64   // r.opID: the call in flight
	req  *request // its request, to abandon
	wake time.Time
	wtm  *timer // r.wakeC; nil when there is none

	stopped bool   // ctx.Done() was handled (stop = nil)
	giveUp  *timer // r.giveUp
	done    bool   // r.done
	exited  bool   // the loop returned; the deferred cleanup runs
	failed  bool   // Run returns an error: the release was not confirmed
	term    *fastTerm
	disp    dispatcher
	notif   notifier
	held    *job // r.held: the barrier after a term's callbacks
	// heldReady: the held barrier was reached during an apply; the loop
	// takes it once that apply has returned.
	heldReady bool
	applying  int
	dead      bool // crashed
}

// fastTerm models a term's context.
type fastTerm struct {
	tok       uint64
	cancelled bool
	deadline  time.Time // the term context's own check (termContext.ended); zero: none
}

// over models the term context's Done and Err: cancelled by the loop, or
// past its deadline by the clock.
func (f *fastRun) over(t *fastTerm) bool {
	return t.cancelled || !t.deadline.IsZero() && !f.now().Before(t.deadline)
}

func newFastRun(in *instance) *fastRun {
	f := &fastRun{in: in, w: in.w}
	c := in.cfg
	ec := election.Config{
		ID:            c.ID,
		LeaseDuration: c.LeaseDuration,
		RenewInterval: c.RenewInterval,
		PollInterval:  c.PollInterval,
		OpTimeout:     c.OpTimeout,
		RetryMin:      c.RetryMin,
		RetryMax:      c.RetryMax,
		MaxDrift:      c.MaxDrift,
		Margin:        c.Margin,
		Payload:       c.Payload,
		Rand:          in.w.machineRand(in),
		Wall:          in.wallNow,
	}
	if in.w.opt.Strategy == Naive {
		f.m = newNaive(ec, in.wallNow)
	} else {
		m, err := election.New(ec)
		if err != nil {
			panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the config passed tenure.Config.Validate
		}
		f.m = m
	}
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

func (f *fastRun) start() { f.apply(f.m.Start(f.now())) }

func (f *fastRun) fire(tm *timer) {
	if !f.dead {
		tm.fire()
	}
}

func (f *fastRun) deliver(req *request) {
	if f.dead || f.exited {
		return // the call's goroutine gives up on quit
	}
	if req == f.req {
		f.req = nil
	}
	f.apply(f.m.Done(f.now(), election.Result{ID: req.opID, Record: req.res.rec, Version: req.res.ver, Err: req.res.err}))
	f.loop()
}

// stop models `case <-stop`: Stop, then release once the callbacks drain.
func (f *fastRun) stop() {
	if f.dead || f.exited || f.stopped {
		return
	}
	f.stopped = true
	if f.held != nil { // r.held = nil: no campaign after the stop
		f.held.dead = true
		f.held = nil
	}
	f.apply(f.m.Stop(f.now()))
	f.disp.push(&job{kind: jBarrier})
	f.loop()
}

func (f *fastRun) drained() {
	if f.exited {
		return
	}
	f.giveUp = f.after(srcRunner, f.in.cfg.ReleaseTimeout, func() {
		if !f.exited {
			f.failed = true
			f.exit()
		}
	})
	f.apply(f.m.Release(f.now()))
	f.loop()
}

// callbacksDone models `case <-r.held`.
func (f *fastRun) callbacksDone() {
	if f.exited {
		return
	}
	f.held = nil
	f.apply(f.m.CallbacksDone(f.now()))
	f.loop()
}

func (f *fastRun) onWake(tm *timer) {
	if f.exited || tm != f.wtm {
		return
	}
	f.wtm = nil
	f.apply(f.m.Tick(f.now()))
	f.loop()
}

// loop models `for !r.done`.
func (f *fastRun) loop() {
	if f.done && !f.exited {
		f.exit()
	}
}

// exit models run's deferred cleanup: cancel calls in flight, stop
// listening, let the dispatcher drain, and return once it has.
func (f *fastRun) exit() {
	f.exited = true
	f.abandon()
	if f.wtm != nil {
		f.wtm.dead = true
	}
	if f.giveUp != nil {
		f.giveUp.dead = true
	}
	f.disp.close()
	f.notif.close()
}

func (f *fastRun) abandon() {
	if f.req != nil {
		f.req.abandoned = true
		f.req = nil
	}
}

// apply models runner.apply.
func (f *fastRun) apply(out election.Output) {
	now := f.now()
	if out.Abandon != 0 && out.Abandon == f.op {
		f.abandon()
	}
	if out.Op != nil {
		f.startOp(*out.Op, now)
	}
	if t, ok := f.m.Term(); ok && f.term != nil { // r.publish
		f.term.deadline = t.Deadline
	}
	f.applying++
	var leader *election.Leader
	for _, e := range out.Events {
		if e.Kind == election.EventLeaderChanged {
			leader = &e.Leader
			continue
		}
		f.event(e)
	}
	if leader != nil {
		f.notif.push(*leader)
	}
	f.done = out.Done
	switch {
	case out.Wake.IsZero():
		f.dropWake()
	case f.wtm == nil || !out.Wake.Equal(f.wake):
		f.wake = out.Wake
		f.dropWake()
		var tm *timer
		tm = f.after(srcRunner, out.Wake.Sub(now), func() { f.onWake(tm) })
		f.wtm = tm
	}
	f.applying--
	if f.applying == 0 && f.heldReady {
		// The loop takes r.held once the current apply has returned.
		f.heldReady = false
		f.callbacksDone()
	}
}

func (f *fastRun) dropWake() {
	if f.wtm != nil {
		f.wtm.dead = true
		f.wtm = nil
	}
}

func (f *fastRun) startOp(op election.Op, now time.Time) {
	f.op = op.ID
	rec := op.Record
	if rec.WrittenAt.IsZero() { // the naive strategy stamps its own wall time
		rec.WrittenAt = now.Round(0).UTC()
	}
	req := &request{in: f.in, kind: op.Kind, opID: op.ID, rec: rec, expect: op.Expect}
	f.req = req
	f.w.stage(item{in: f.in, src: srcStore, kind: itRequest, req: req})
}

// event models runner.event, with the sim's callbacks queued on the model
// of the dispatcher.
func (f *fastRun) event(e election.Event) {
	switch e.Kind {
	case election.EventElected:
		t := &fastTerm{tok: e.Term.Token}
		if tm, ok := f.m.Term(); ok { // the naive baseline has no deadline to check
			t.deadline = tm.Deadline
		}
		f.term = t
		f.w.stage(item{in: f.in, src: srcRunner, kind: itElected, tok: t.tok})
		f.disp.push(&job{kind: jElected, term: t})
	case election.EventDemoted:
		t := f.term
		if t == nil {
			f.w.stage(item{in: f.in, src: srcRunner, kind: itViolation, inv: Callbacks, s: "EventDemoted without a term"})
			return
		}
		f.term = nil
		t.cancelled = true
		f.disp.cancelled(t)
		reason := tenure.DemotionReason(e.Reason).String()
		f.w.stage(item{in: f.in, src: srcRunner, kind: itDemoted, tok: t.tok, s: reason, deadline: e.Term.Deadline})
		f.disp.push(&job{kind: jDemoted, term: t, reason: reason})
		if !f.stopped {
			f.held = &job{kind: jHeld}
			f.disp.push(f.held)
		}
	}
}

func (f *fastRun) crash() {
	f.dead = true
	f.in.finished = true
	f.w.running--
}

func (f *fastRun) observed() election.Leader { return f.m.Leader() }

func (f *fastRun) poll() {}

// finish models Run's return: the sim's goroutine that called Run reports it.
func (f *fastRun) finish() {
	s := ""
	if f.failed {
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
	jHeld // the barrier after a term's callbacks: the candidate may campaign
)

type job struct {
	kind    jobKind
	term    *fastTerm
	reason  string
	leader  election.Leader
	waiting bool   // jElected: waiting for the next round of work
	tm      *timer // what it waits for
	dead    bool   // jHeld: nobody waits for it any more
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
func (f *fastRun) joined() {
	if f.disp.finished && f.notif.finished {
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
		f.drained()
		d.next()
	case jHeld:
		if !j.dead {
			if f.applying > 0 {
				f.heldReady = true
			} else {
				f.callbacksDone()
			}
		}
		d.next()
	}
}

func (d *dispatcher) sleep(dur time.Duration) {
	if dur <= 0 {
		d.next()
		return
	}
	d.cur.tm = d.f.after(srcCallbacks, dur, d.next)
}

// workLoop models the top of OnElected's loop: a select on the term's
// context and a timer for the next round, the timer created either way.
func (d *dispatcher) workLoop(j *job) {
	f := d.f
	tm := f.after(srcCallbacks, f.w.plan.Work, func() { d.check(j) })
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
	j.tm = f.after(srcCallbacks, f.w.plan.Act, func() {
		f.w.stage(item{in: f.in, src: srcCallbacks, kind: itWrite, tok: j.term.tok})
		d.workLoop(j)
	})
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
	f.w.stage(item{in: f.in, src: srcLeader, kind: itCbLeader, tok: l.Token, s: l.Holder})
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
