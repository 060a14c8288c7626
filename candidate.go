package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/fencekey"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

var (
	// ErrRunning is returned by a second call to Run: a Candidate runs once.
	ErrRunning = errors.New("tenure: Run already called on this Candidate")

	// ErrReleaseUnconfirmed is wrapped by Run's error when the release of the
	// lease was not confirmed within ReleaseTimeout. The lease then ends on
	// its own, a lease duration after the last renewal; the error also wraps
	// the last store error, which says why.
	ErrReleaseUnconfirmed = errors.New("tenure: release not confirmed")

	// ErrRunEnded is returned by Resign once Run has returned: there is no
	// term to end, and the lease was given back when Run returned.
	ErrRunEnded = errors.New("tenure: Run has returned")
)

// Candidate campaigns for one lease. Create it with New and call Run.
type Candidate struct {
	cfg     Config // validated
	started atomic.Bool

	mu     sync.Mutex // guards status
	status Status

	obs   seam.Observer // the simulator's, or nil
	ready chan struct{} // closed once Run has made rn
	rn    *runner

	ms       *metrics
	meter    metric.Meter
	running  atomic.Bool
	loopAt   atomic.Int64 // Unix nanoseconds of the loop's latest step, by the clock
	answered lastAnswer
}

func init() {
	seam.Observe = func(c any, o seam.Observer) { c.(*Candidate).obs = o }
}

// Status is a snapshot of what a Candidate knows.
type Status struct {
	// Leader is the leader as last observed in the store (maybe this
	// candidate); the zero Leader when there is none.
	Leader Leader
	// Leading reports whether this candidate leads now, by its own clock.
	Leading bool
	// Token is the fencing token of this candidate's term, while Leading.
	Token fencing.Token
	// Deadline is the local instant at which the term ends unless renewed,
	// while Leading.
	Deadline time.Time
	// Err is the last store error (other than a conflict or a missing lease),
	// cleared by the next successful call; errors.Is(Err, lease.ErrPermanent)
	// for one that retrying cannot cure (a missing table, access denied).
	// Once another process was seen writing with this candidate's ID, Err is
	// an *election.DuplicateIDError whenever no store error is pending.
	Err error
	// LastAnswer is the local time the store last answered (a record, a
	// conflict, no record); zero before its first answer.
	LastAnswer time.Time
	// Standby reports whether this candidate is the standby
	// (Config.Standby): the follower that reads the lease every
	// PollInterval.
	Standby bool
	// Jeopardy, while Leading, is when the term's renewals began failing
	// (by this candidate's clock): it ends at Deadline unless one lands.
	// Zero while they do not fail. JeopardyOf tells the term's own code.
	Jeopardy time.Time
}

// New returns a Candidate for cfg, with the defaults of the fields left zero
// filled in (on New's copy: cfg is not changed), or the first problem
// Config.Validate finds.
func New(cfg Config) (*Candidate, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	c := &Candidate{cfg: cfg, ready: make(chan struct{})}
	if c.ms, c.meter, err = newMetrics(cfg.MeterProvider, attribute.String("lease", cfg.Lease)); err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	return c, nil
}

// Resign ends the current term, if any (ReasonResigned), and, once its
// callbacks have returned, gives the lease back with its token kept, so that
// another candidate takes over within a poll interval; this candidate stays
// a follower for ResignHoldOff (or HoldOff's) and then campaigns again. Use
// it for rolling deploys and draining. It returns once the lease is given
// back (or this candidate did not hold it), or with ctx's error; it waits
// for Run to be running, and returns ErrRunEnded once Run has returned. Called from OnElected it would wait for OnElected
// itself to return: call it there from a goroutine of its own.
func (c *Candidate) Resign(ctx context.Context, opts ...ResignOption) error {
	req := resignReq{done: make(chan struct{}), holdOff: c.cfg.ResignHoldOff}
	for _, o := range opts {
		o(&req)
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !c.rn.h.Do(func() { c.rn.run.Resign(req.holdOff, func() { close(req.done) }) }) {
		return ErrRunEnded // a caller that meant to hand over should know it did not
	}
	select {
	case <-req.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ResignOption changes one call of Resign.
type ResignOption func(*resignReq)

type resignReq struct {
	done    chan struct{}
	holdOff time.Duration
}

// HoldOff keeps the candidate a follower for d after this Resign, instead
// of Config.ResignHoldOff: a supervisor whose work keeps failing backs off
// this way, so that two candidates do not hand the lease back and forth.
func HoldOff(d time.Duration) ResignOption { return func(r *resignReq) { r.holdOff = max(d, 0) } }

// ID returns the identity this candidate writes into the lease.
func (c *Candidate) ID() string { return c.cfg.ID }

// Status returns what the candidate knows now. It is safe to call at any time
// from any goroutine.
func (c *Candidate) Status() Status {
	c.mu.Lock()
	s := c.status
	c.mu.Unlock()
	s.LastAnswer = c.answered.get()
	s.Leading = s.Leading && c.cfg.Clock.Now().Before(s.Deadline)
	if !s.Leading {
		s.Token, s.Deadline = 0, time.Time{}
	}
	return s
}

// Run campaigns for the lease until ctx is done, delivering callbacks as
// Callbacks describes. Then it ends any term (ReasonShutDown), waits for the
// callbacks to return, and gives the lease back, spending at most
// ReleaseTimeout on that. It returns nil once the lease was released or was
// not held, or an error wrapping ErrReleaseUnconfirmed if the release could
// not be confirmed in time (the lease then expires on its own). It returns
// only after every goroutine it started has exited.
//
// If a read, or a write, fails with an error that retrying cannot cure
// (lease.ErrPermanent: a missing table or bucket, access denied, a
// read-only disk; or lease.ErrInvalidRecord: a record no one can decode)
// before the store has once answered a call of that kind (a read, a write of
// a new record, a write over a version: stores grant them apart, as
// Kubernetes' create and update), Run returns it at once: a store that never
// worked is misconfigured. Later such errors are
// logged, kept in Status().Err, and retried, since an operator may mend
// them.
//
// If a callback panics, Run ends the term and releases the lease as if ctx
// were done, runs no further callback, and then panics with a
// *CallbackPanic that carries the value and the callback's stack.
func (c *Candidate) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	m, err := election.New(c.cfg.machineConfig())
	if err != nil {
		return fmt.Errorf("tenure: %w", err) // Validate already passed: not reached
	}
	reg, err := c.observeGauges()
	if err != nil {
		return fmt.Errorf("tenure: metrics: %w", err)
	}
	defer func() { _ = reg.Unregister() }()
	r := &runner{c: c, runCtx: ctx}
	r.h = host.New(host.Config{
		Clock: c.cfg.Clock, Store: c.cfg.Store,
		Context: context.WithoutCancel(ctx), // ctx's values reach the store; the release outlives ctx
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			c.ms.storeCall(opName(kind), err, took)
			c.answered.note(c.cfg.Clock, err)
		},
		After: r.after,
	})
	panicked := func(p *CallbackPanic) { r.h.Do(func() { r.crash(p) }) }
	r.disp = newDispatcher(c.cfg.Clock, panicked)
	if f := c.cfg.Callbacks.OnLeaderChange; f != nil {
		r.notify = &notifier{wake: make(chan struct{}, 1), f: f, panicked: panicked}
	}
	if err := r.newRun(m); err != nil {
		return err
	}
	c.rn = r
	close(c.ready)
	c.loopAt.Store(c.cfg.Clock.Now().UnixNano())
	c.running.Store(true)
	defer c.running.Store(false)
	return r.loop(ctx)
}

// observeGauges reports tenure.leader, tenure.token and tenure.term while
// Run runs.
func (c *Candidate) observeGauges() (metric.Registration, error) {
	leader, err1 := c.meter.Int64ObservableGauge("tenure.leader", metric.WithDescription("1 while this candidate leads the lease, else 0."))
	token, err2 := c.meter.Int64ObservableGauge("tenure.token", metric.WithDescription("The fencing token of the current term; 0 outside a term."))
	term, err3 := c.meter.Int64ObservableGauge("tenure.term", metric.WithDescription("1 while leading, with the term's token as an exact decimal attribute."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	return c.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := c.Status()
		var lead, tok int64
		if st.Leading {
			lead, tok = 1, int64(st.Token)
			o.ObserveInt64(term, 1, metric.WithAttributes(c.ms.base, attribute.String("token", strconv.FormatUint(uint64(st.Token), 10))))
		}
		o.ObserveInt64(leader, lead, c.ms.opts)
		o.ObserveInt64(token, tok, c.ms.opts)
		return nil
	}, leader, token, term)
}

// runner carries out one Run: a host (internal/host) with the run's
// entries (engine.Run: the lease's, and the standby's), on the goroutine
// that called Run; callbacks run on the dispatcher's goroutine. It is the
// run's engine.RunEffects.
type runner struct {
	c       *Candidate
	h       *host.Host
	run     *engine.Run
	d       *driver.Driver // run's
	disp    *dispatcher
	notify  *notifier // nil without OnLeaderChange
	runCtx  context.Context
	crashed *CallbackPanic // the first callback that panicked

	term Term
	tctx *termContext // nil outside a term

	woken   chan struct{} // closed once the lease is given back: wake the standby; nil if none waits
	warnAt  time.Time     // next warning about a wedged OnElected
	errAt   time.Time     // when the current store error was last logged
	lastErr string
	outage  time.Time  // when the store errors began; zero: it answers
	flood   floodGuard // repeated warnings counted, not repeated

	anomalyAt   time.Time // when lastAnomaly was last logged
	lastAnomaly string

	conn    seam.WakeConn // the wake-up listener; nil without one
	notices *sender       // renewal notices, one queued at most

	feedLive atomic.Bool        // the store's change feed tells of the lease's writes
	feedWake lockcore.WakeLimit // the loop's: releases the feed tells of (feedReleased)
}

func (r *runner) loop(ctx context.Context) error {
	cfg := &r.c.cfg
	r.h.Go(r.disp.run)
	if r.notify != nil {
		r.h.Go(r.notify.run)
	}
	stopFeed := r.startFeed()
	defer func() {
		stopFeed()
		if r.tctx != nil { // not reached: Stop ends the term
			r.tctx.cancel(errStopped)
		}
		r.disp.close()
		if r.notify != nil {
			r.notify.close()
		}
		if r.conn != nil {
			_ = r.conn.Close()
		}
		r.h.Wait()
	}()
	r.run.Start()
	r.after()
	r.h.Run(ctx.Done(), r.stop)
	if err := r.run.Err(); err != nil {
		return err
	}
	r.run.Finish()
	if r.crashed != nil {
		panic(r.crashed)
	}
	if r.d.GaveUp() {
		cause := r.d.Machine().Err()
		if cause == nil {
			cause = errors.New("no answer from the store")
		}
		r.log(slog.LevelWarn, "release not confirmed; the lease will expire", "err", cause)
		return fmt.Errorf("%w: lease %q within %v: %w", ErrReleaseUnconfirmed, cfg.Lease, cfg.ReleaseTimeout, cause)
	}
	return nil
}

// after runs on the loop after each event.
func (r *runner) after() {
	r.c.loopAt.Store(r.Now().UnixNano())
	over := r.run.After()
	r.checkWedged()
	if over {
		r.h.Exit()
	}
}

// crash ends the run after a callback panicked: the first panic is
// Run's.
func (r *runner) crash(p *CallbackPanic) {
	if r.crashed != nil {
		return
	}
	r.crashed = p
	r.log(slog.LevelError, "callback panicked; ending the term and releasing the lease", "callback", p.Callback, "panic", fmt.Sprint(p.Value))
	r.stop()
}

var errStopped = errors.New("tenure: Run ended")

// stop ends the run: the term, then the release; and the standby campaign.
func (r *runner) stop() { r.run.Stop() }

// PlanWake reads the standby's record now, to send its holder a wake-up
// once the lease given back is confirmed (WakeNow).
func (r *runner) PlanWake() {
	r.woken = make(chan struct{})
	r.wakeStandby(r.woken)
}

// WakeNow sends the planned wake-up: the lease was given back.
func (r *runner) WakeNow() {
	if r.woken != nil {
		close(r.woken)
		r.woken = nil
	}
}

// The engine.RunEffects of a Candidate.

func (r *runner) Now() time.Time { return r.c.cfg.Clock.Now() }

// Barrier queues a barrier on the dispatcher, which passes it to the loop.
func (r *runner) Barrier(b driver.Barrier) {
	r.disp.push("", func() { r.h.Do(func() { r.d.Reached(b) }) })
}

func (r *runner) Elected(t election.Term) {
	cfg := &r.c.cfg
	term := Term{Lease: cfg.Lease, Holder: cfg.ID, Token: t.Token, Deadline: t.Deadline, Payload: cfg.Payload}
	tc := newTermContext(r.runCtx, term, cfg.Clock)
	r.term, r.tctx = term, tc
	if now := cfg.Clock.Now(); t.Deadline.Sub(now) < cfg.OpTimeout {
		// Confirmed late, it begins in jeopardy: say so before OnElected
		// runs and can ask (the driver's Publish after this step says it
		// again, unchanged).
		since := followJeopardy(tc, now, driver.Snapshot{Leading: true, Term: t, Short: true}, r.c.ms, r.log)
		r.c.mu.Lock()
		r.c.status.Jeopardy = since
		r.c.mu.Unlock()
	}
	r.log(slog.LevelInfo, "elected", "token", term.Token)
	r.c.ms.elected()
	if o := r.c.obs; o != nil {
		o.Elected(uint64(t.Token))
	}
	if f := cfg.Callbacks.OnElected; f != nil {
		r.disp.push("OnElected", func() { f(tc, term) })
	}
}

func (r *runner) Demoted(_ election.Term, why election.Reason) {
	cfg := &r.c.cfg
	term, reason := r.term, DemotionReason(why)
	followJeopardy(r.tctx, cfg.Clock.Now(), driver.Snapshot{}, r.c.ms, r.log) // over with the term
	r.tctx.announce()
	r.tctx.cancel(&TermEndedError{Lease: cfg.Lease, Token: term.Token, Reason: reason}) // before OnDemoted is even queued
	r.tctx = nil
	r.log(slog.LevelInfo, "demoted", "token", term.Token, "reason", reason.String())
	r.c.ms.demoted(reason)
	if o := r.c.obs; o != nil {
		o.Demoted(uint64(term.Token), reason.String())
	}
	if f := cfg.Callbacks.OnDemoted; f != nil {
		r.disp.push("OnDemoted", func() { f(term, reason) })
	}
	r.warnAt = r.Now().Add(cfg.Margin)
}

func (r *runner) LeaderChanged(l election.Leader) {
	r.log(slog.LevelDebug, "leader changed", "leader", l.Holder, "token", l.Token)
	if r.notify != nil {
		r.notify.push(l)
	}
}

// Anomaly logs a lost or foreign record, or a duplicate ID, once and then
// once a minute (or a lease) while the same one persists: a duplicate ID
// is seen at every poll.
func (r *runner) Anomaly(err error) {
	r.c.ms.anomaly()
	now := r.Now()
	if msg := err.Error(); msg != r.lastAnomaly || !now.Before(r.anomalyAt.Add(max(time.Minute, r.c.cfg.LeaseDuration))) {
		r.lastAnomaly, r.anomalyAt = msg, now
		r.log(slog.LevelError, "lease anomaly", "err", err)
	}
}

// Publish updates the snapshot Status reads, and the deadline the term's
// context checks.
func (r *runner) Publish(snap driver.Snapshot, standby bool) {
	s := Status{
		Leader:  snap.Leader,
		Err:     snap.Err,
		Standby: standby,
	}
	if snap.Leading {
		s.Leading, s.Token, s.Deadline = true, snap.Term.Token, snap.Term.Deadline
	}
	if r.tctx != nil {
		s.Jeopardy = followJeopardy(r.tctx, r.c.cfg.Clock.Now(), snap, r.c.ms, r.log)
	}
	r.c.mu.Lock()
	r.c.status = s
	r.c.mu.Unlock()
	if r.tctx != nil {
		r.tctx.announce()
	}
	r.logErr(s.Err)
}

// Hot says whether this candidate is the standby, outside the driver's
// step.
func (r *runner) Hot(hot bool) {
	r.c.mu.Lock()
	r.c.status.Standby = hot
	r.c.mu.Unlock()
}

// HandOver logs a hand-over to a standby of higher priority.
func (r *runner) HandOver(holder string, priority int) {
	if o := r.c.obs; o != nil {
		o.HandOver()
	}
	r.log(slog.LevelInfo, "handing the lease over to a candidate of higher priority", "standby", holder, "priority", priority, "ours", r.c.cfg.Priority)
}

// Log logs for the run's entries.
func (r *runner) Log(level slog.Level, msg string, args ...any) { r.log(level, msg, args...) }

// checkWedged warns while OnElected of an ended term keeps running: the
// candidate does not campaign meanwhile, so nobody here does the leader's
// work. The first warning comes Margin after the term ended, then one every
// LeaseDuration.
func (r *runner) checkWedged() {
	ended, held := r.d.Held()
	if !held {
		return
	}
	name, since := r.disp.busy()
	if name != "OnElected" {
		return
	}
	cfg := &r.c.cfg
	now := r.Now()
	if now.Before(r.warnAt) {
		return
	}
	r.warnAt = now.Add(cfg.LeaseDuration)
	r.log(slog.LevelWarn, "OnElected still running after its term ended; not campaigning until it returns",
		"token", r.term.Token, "running", now.Sub(since).String(), "ended", now.Sub(ended).String())
}

// logErr logs a store error when it first appears and, while it persists,
// again once a minute (or once a lease, if longer): a permanent error at
// error level, others as warnings.
func (r *runner) logErr(err error) {
	now := r.Now()
	if err == nil {
		if !r.outage.IsZero() {
			r.log(slog.LevelWarn, "store answers again", "after", now.Sub(r.outage).Round(time.Millisecond).String())
		}
		r.lastErr, r.outage = "", time.Time{}
		return
	}
	if errors.As(err, new(*election.DuplicateIDError)) {
		return // Anomaly logs it
	}
	if r.outage.IsZero() {
		r.outage = now
	}
	cfg := &r.c.cfg
	if msg := err.Error(); msg != r.lastErr || !now.Before(r.errAt.Add(max(time.Minute, cfg.LeaseDuration))) {
		r.lastErr, r.errAt = msg, now
		level := slog.LevelWarn
		if errors.Is(err, lease.ErrPermanent) {
			level = slog.LevelError
		}
		r.log(level, "store error", "err", err)
	}
}

func (r *runner) log(level slog.Level, msg string, args ...any) {
	if l := r.c.cfg.Logger; l != nil {
		r.flood.log(l, r.c.cfg.Clock.Now(), level, msg, append([]any{"lease", r.c.cfg.Lease, "id", r.c.cfg.ID}, args...)...)
	}
}

// termContext is the context of one term. Besides the cancellation the loop
// sends, its Done and Err check the clock against the term's deadline, so
// that a process resumed from a pause sees its term over at once, before the
// loop goroutine has run; fencing.Err sees the same through contexts
// derived from it.
type termContext struct {
	context.Context
	cancel context.CancelCauseFunc
	clk    Clock
	fence  fencing.Fence

	mu       sync.Mutex // guards what follows
	deadline time.Time
	jp       *termJeopardy // nil until a renewal fails or JeopardyOf asks: held locks are many
}

// termJeopardy is a term's jeopardy, and those waiting on its change.
type termJeopardy struct {
	j       driver.Jeopardy
	changed chan struct{} // closed at j's next change (JeopardyOf); nil until asked for
	told    time.Time     // j's Since when changed was made
}

// jeopardy returns the term's jeopardy, made on first use from the
// deadline of the last confirmed renewal; t.mu is held.
func (t *termContext) jeopardy(now time.Time) *termJeopardy {
	if t.jp == nil {
		t.jp = new(termJeopardy)
		t.jp.j.Update(now, driver.Snapshot{Leading: true, Term: election.Term{Deadline: t.deadline}})
	}
	return t.jp
}

func newTermContext(parent context.Context, term Term, clk Clock) *termContext {
	t := new(termContext)
	t.init(parent, term, clk)
	return t
}

// init makes t the context of term, as newTermContext does, in place: a
// Lock holds its term's context in itself.
func (t *termContext) init(parent context.Context, term Term, clk Clock) {
	*t = termContext{clk: clk, deadline: term.Deadline, fence: term.Fence()}
	t.Context, t.cancel = context.WithCancelCause(parent)
}

// Value answers fencing's keys itself (fencing.NewContext and WithTerm,
// without a context each): the term's fence, and its end as the clock says;
// and JeopardyOf's, the term itself.
func (t *termContext) Value(key any) any {
	switch key.(type) {
	case fencekey.Fence:
		return t.fence
	case fencekey.Term:
		return t.ended
	case jeopardyKey:
		return t
	case seam.TermCancelled:
		return func() bool { return t.Context.Err() != nil }
	}
	return t.Context.Value(key)
}

// publish takes what a step of the term's Machine published at now: the
// deadline moves with a confirmed renewal, and the term goes into jeopardy
// or out of it. It returns whether the jeopardy changed, and since when
// the renewals have been failing (zero: they have not). Those waiting on
// JeopardyOf learn of a change at announce, once the Status says it too.
func (t *termContext) publish(now time.Time, s driver.Snapshot) (changed bool, since time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jp == nil && (!s.Leading || s.Err == nil && !s.Short) {
		if s.Leading {
			t.deadline = s.Term.Deadline
		}
		return false, time.Time{} // safe, as it was
	}
	jp := t.jeopardy(now)
	if s.Leading {
		t.deadline = s.Term.Deadline
	}
	return jp.j.Update(now, s), jp.j.Since()
}

// announce wakes those waiting on JeopardyOf, if the jeopardy changed
// since they asked.
func (t *termContext) announce() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if jp := t.jp; jp != nil && jp.changed != nil && jp.j.Since() != jp.told {
		close(jp.changed)
		jp.changed = nil
	}
}

// current returns the term's deadline as of the latest renewal.
func (t *termContext) current() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// ended cancels the context if the deadline has passed, and returns its
// error.
func (t *termContext) ended() error {
	if !t.clk.Now().Before(t.current()) {
		t.cancel(errDeadline)
	}
	return t.Context.Err()
}

var errDeadline = errors.New("tenure: the term's deadline passed")

func (t *termContext) Err() error { return t.ended() }

func (t *termContext) Done() <-chan struct{} {
	t.ended()
	return t.Context.Done()
}
