package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

// fastRun is the fast tier's Candidate: the production glue of a Run
// (internal/engine's Candidate: the lease's driver and release timer, the
// standby campaign or a leader's watch of its record, resigns, hand-overs,
// the terms' contexts, the callbacks' queues, the standby's wake-up) on the
// production host.Core (engineHost). It is that glue's shell for the
// simulator's single thread: it stages on the simulator's queue what the
// Candidate's goroutines do in the real tier, and runs the sim's program
// (OnElected's rounds of work, OnDemoted, OnLeaderChange) as the glue's
// queues hand its calls out.
type fastRun struct {
	trusted bool // Options.trustFeed: a feed event came; take the lease at the next read

	in  *instance
	w   *world
	eng *engineHost
	c   *engine.Candidate
	run *engine.Run
	d   *driver.Driver
	m   driver.Machine

	exited bool // the loop returned; the deferred cleanup runs
	dead   bool // crashed

	// The callbacks' goroutines, run in turn: dispatching, inside
	// dispatch (a job queued by a callback only queues); elected, the
	// program's OnElected running (nil: none); notifying, an
	// OnLeaderChange running; dispDone and notifDone, the goroutines
	// returned, which Run waits for.
	dispatching, notifying bool
	elected                *program
	dispDone, notifDone    bool
	termStart              time.Duration // true time of the latest election
	// plans are the wake-ups of the standby planned whose reads'
	// goroutines have yet to return (Run waits for them too).
	plans []*engine.WakePlan

	// With a standby (Timing.ColdPollInterval): whether the Machine reads
	// at the cold cadence, as the run last said (Hot).
	hasSB    bool
	cold     bool
	returned bool // Run returned (finish)
	priority int  // Config.Priority
	// Renewal notices (Plan.Wake), for noticeBound: the last confirmed
	// write's deadline, and where and when its notice went ("" if none).
	confirmed time.Time
	noticeTo  string
	noticeAt  time.Duration
	hotSince  time.Duration // true time the Machine was last told hot
}

// program is the sim's OnElected of one term: a loop that waits for the
// next round of work, checks its term's context, and writes.
type program struct {
	ctx     *engine.TermContext
	tok     uint64
	waiting bool   // waiting for the next round of work
	tm      *timer // what it waits for
	// The rounds of the leader's work, made once a term rather than a
	// closure each round.
	check, act func()
}

func newFastRun(in *instance) instRuntime {
	f := &fastRun{in: in, w: in.w, eng: newEngineHost(in)}
	in.ht = &f.eng.ht
	f.eng.owes = owesLease
	f.eng.started = f.started
	ec := election.Config{ID: in.ID, Timing: in.timing, Rand: in.w.machineRand(in), Wall: in.wallNow, StaleReads: in.w.plan.StaleReads, ClockTokens: in.w.clockTokens()}
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
	f.c = engine.NewCandidate(f.eng.core, f.m, engine.CandidateConfig{
		Run: rc, LeaseDuration: in.timing.LeaseDuration, OpTimeout: in.timing.OpTimeout, Margin: in.timing.Margin,
		Parent: context.Background(), Clock: f, Meter: (*fastMeter)(f), Observer: (*fastObserver)(f),
		Ended:     func(string, fencing.Token, election.Reason) error { return errTermEnded },
		OnElected: true, OnDemoted: true, OnLeaderChange: true,
	}, f)
	f.run = f.c.Run()
	f.d = f.run.Driver()
	return f
}

var errTermEnded = errors.New("sim: the term ended")

// Now is the instance's clock, which the terms' contexts read.
func (f *fastRun) Now() time.Time { return f.in.local() }

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
	if req.plan != nil {
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
// and the host's): the glue settles the event (engine.Candidate.After),
// then the run ends or the host's timer is armed for the next iteration.
func (f *fastRun) loop() {
	if f.exited {
		return
	}
	if f.c.After() {
		f.exit()
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
	req.plan.Read(req.res.rec, req.res.err)
	f.joined() // Run waits for this read
}

// noticedMsg takes a renewal notice as it came over the network, telling
// its renewal or not, as the Candidate's listener does.
func (f *fastRun) noticedMsg(msg string) {
	if f.dead || f.exited {
		return
	}
	if r, ok := shell.ParseNotice(leaseName, []byte(msg)); ok {
		f.c.NoticedRenewal(r)
		f.loop()
	}
}

// woken takes a wake-up, within the rate limit.
func (f *fastRun) woken() {
	if f.dead || f.exited {
		return
	}
	f.c.Woken() // the observer counts and traces it
	f.loop()
}

// exit models run's deferred cleanup: cancel the lease's call in flight,
// drop a wake-up planned for a release never confirmed, stop listening,
// let the callbacks' goroutines drain, and return once they and the
// wake-up's have.
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
	f.c.Exit()
	f.c.Dispatch.Close()
	f.dispatch()
	f.c.Notify.Close()
	f.notify()
	f.joined()
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

// The engine.CandidateShell of the fast tier: what tenure.Candidate's
// runner does, staged for the world.

// Published notes a confirmed write, for noticeBound: its notice, if one
// goes out, follows at once (SendNotice).
func (f *fastRun) Published(s driver.Snapshot, _ bool) {
	// Not traced: the real tier's trace must match this one line for line.
	if f.hasSB && s.Leading && s.Term.Deadline.After(f.confirmed) {
		f.confirmed, f.noticeTo, f.noticeAt = s.Term.Deadline, "", f.w.now
	}
}

func (f *fastRun) SendNotice(addr string, r engine.Renewal) {
	f.noticeTo = addr
	// From the listener's sender goroutine, as the Candidate's.
	f.w.stage(item{in: f.in, src: srcSend, kind: itWake, s: addr, msg: shell.RenewalMsg(leaseName, r)})
}

// Hot: the Machine is told to read at the hot cadence, or the cold.
func (f *fastRun) Hot(hot bool) {
	f.cold = !hot
	f.hotStint(hot)
}

// ReadStandby reads the standby record now, to wake its holder once the
// lease is given back (runner.ReadStandby): with or without a wake-up
// network, since the leader cannot know whether its standby listens.
func (f *fastRun) ReadStandby(p *engine.WakePlan) {
	f.plans = append(f.plans, p)
	req := &request{in: f.in, kind: election.OpGet, reg: f.w.store.sb, plan: p}
	f.w.stage(item{in: f.in, src: srcWake, kind: itRequest, req: req})
}

// SendWake sends the wake-up, from the goroutine that read the standby
// record, as the Candidate's.
func (f *fastRun) SendWake(to string) {
	f.w.stage(item{in: f.in, src: srcWake, kind: itWake, s: to, msg: wakePrefix + leaseName})
	f.joined()
}

func (f *fastRun) Dispatched() { f.dispatch() }
func (f *fastRun) Notified()   { f.notify() }

// fastObserver hears of terms, wake-ups and hand-overs from the glue, at
// the instant they happen (seam.Observer, as the real tier's).
type fastObserver fastRun

func (o *fastObserver) f() *fastRun { return (*fastRun)(o) }

func (o *fastObserver) Elected(t election.Term) {
	f := o.f()
	f.termStart = f.w.now
	f.w.stage(item{in: f.in, src: srcRunner, kind: itElected, tok: uint64(t.Token)})
}

// Demoted: the term's context was just cancelled; OnElected leaves its
// select. A term that ended for want of renewals must have been reported
// in jeopardy.
func (o *fastObserver) Demoted(t election.Term, r election.Reason) {
	f := o.f()
	tok := uint64(t.Token)
	if p := f.elected; p != nil && p.tok == tok && p.waiting {
		p.tm.dead = true
		f.cleanup(p)
	}
	reason := r.String()
	if (r == election.ReasonStoreUnavailable || r == election.ReasonExpired) && !f.c.LastTerm().WasInJeopardy() && !f.in.paused && f.in.resumedAt < f.termStart {
		f.w.stage(item{in: f.in, src: srcRunner, kind: itViolation, inv: Callbacks,
			s: "term " + strconv.FormatUint(tok, 10) + " ended for want of renewals (" + reason + ") and was never reported in jeopardy"})
	}
	f.w.stage(item{in: f.in, src: srcRunner, kind: itDemoted, tok: tok, s: reason, deadline: t.Deadline})
}

func (o *fastObserver) Woken() {
	f := o.f()
	f.w.chk.stats.WakesUsed++
	f.w.trace(f.in, line{what: mFault, text: "woken: reading the lease"})
}

func (o *fastObserver) HandOver() { o.w.handingOver(o.in) }

// fastMeter counts the glue's anomalies in the statistics.
type fastMeter fastRun

func (m *fastMeter) Elected()                {}
func (m *fastMeter) Demoted(election.Reason) {}
func (m *fastMeter) Jeopardized(int64)       {}
func (m *fastMeter) Anomaly()                { m.w.chk.stats.Anomalies++ }

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

// dispatch runs the sim's OnElected and OnDemoted as the glue's queue
// (engine.Dispatch) hands them out, one at a time, as tenure's callbacks
// goroutine does: a job queued by a callback waits for it.
func (f *fastRun) dispatch() {
	if f.dispatching {
		return
	}
	f.dispatching = true
	for {
		j, ok := f.c.Dispatch.Next(f.now())
		if !ok {
			break
		}
		f.begin(j)
	}
	f.dispatching = false
	if !f.dispDone && f.c.Dispatch.Finished() {
		f.dispDone = true
		f.joined()
	}
}

// joined models wg.Wait in run's cleanup: Run returns once the callbacks'
// goroutines have returned, and those that read the standby record to
// wake it.
func (f *fastRun) joined() {
	if !f.exited || !f.dispDone || !f.notifDone || f.returned {
		return
	}
	live := f.plans[:0]
	for _, p := range f.plans {
		if !p.Settled() {
			live = append(live, p)
		}
	}
	clear(f.plans[len(live):])
	if f.plans = live; len(live) == 0 {
		f.returned = true
		f.finish()
	}
}

// next ends the current job and runs the following ones.
func (f *fastRun) next() {
	f.c.Dispatch.Done(false)
	f.dispatch()
}

func (f *fastRun) begin(j engine.Job) {
	in := f.in
	switch j.Kind {
	case engine.JobElected:
		p := &program{ctx: engine.TermOf(j.Ctx), tok: uint64(j.Term.Token)}
		f.elected = p
		f.w.stage(item{in: in, src: srcCallbacks, kind: itCbElected, tok: p.tok})
		f.workLoop(p)
	case engine.JobDemoted:
		f.w.stage(item{in: in, src: srcCallbacks, kind: itCbDemoted, tok: uint64(j.Term.Token), s: j.Reason.String(), flag: engine.TermOf(j.Ctx).Cancelled()})
		done := func() {
			f.w.stage(item{in: in, src: srcCallbacks, kind: itCbDemotedDone})
			f.next()
		}
		if dur := in.slow(slowDemoted); dur > 0 {
			f.after(srcCallbacks, dur, done)
		} else {
			done()
		}
	case engine.JobBarrier:
		f.d.Reached(j.Barrier)
		f.loop()
		f.next()
	}
}

// workLoop models the top of OnElected's loop: a select on the term's
// context and a timer for the next round, the timer created either way.
func (f *fastRun) workLoop(p *program) {
	if p.check == nil {
		p.check = func() { f.checkTerm(p) }
		p.act = func() {
			f.w.stage(item{in: f.in, src: srcCallbacks, kind: itWrite, tok: p.tok})
			f.workLoop(p)
		}
	}
	tm := f.after(srcCallbacks, f.w.plan.Work, p.check)
	if p.ctx.Err() != nil {
		tm.dead = true
		f.cleanup(p)
		return
	}
	p.tm, p.waiting = tm, true
}

// checkTerm: ctx.Err() after the timer, before the write.
func (f *fastRun) checkTerm(p *program) {
	p.waiting = false
	if p.ctx.Err() != nil { // the clock is past the deadline
		f.cleanup(p)
		return
	}
	f.w.stage(item{in: f.in, src: srcCallbacks, kind: itCheck, tok: p.tok})
	p.tm = f.after(srcCallbacks, f.w.plan.Act, p.act)
}

func (f *fastRun) cleanup(p *program) {
	p.waiting = false
	if dur := f.in.slow(slowCleanup); dur > 0 {
		p.tm = f.after(srcCallbacks, dur, f.returnedElected)
		return
	}
	f.returnedElected()
}

func (f *fastRun) returnedElected() {
	f.w.stage(item{in: f.in, src: srcCallbacks, kind: itCbReturn})
	f.elected = nil
	f.next()
}

// notify runs the sim's OnLeaderChange as the glue's queue (engine.Notify)
// hands the leaders out, as tenure's goroutine for it does.
func (f *fastRun) notify() {
	for !f.notifying {
		l, ok := f.c.Notify.Next()
		if !ok {
			break
		}
		f.notifying = true
		f.w.stage(item{in: f.in, src: srcLeader, kind: itCbLeader, tok: uint64(l.Token), s: l.Holder})
		if dur := f.in.slow(slowLeader); dur > 0 {
			f.after(srcLeader, dur, f.leaderReturned)
			return
		}
		f.notifying = false
		f.c.Notify.Done(false)
	}
	if !f.notifDone && f.c.Notify.Finished() {
		f.notifDone = true
		f.joined()
	}
}

func (f *fastRun) leaderReturned() {
	f.notifying = false
	f.c.Notify.Done(false)
	f.notify()
}
