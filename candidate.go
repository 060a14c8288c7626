package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/seam"
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

	obs   seam.Observer // the simulator's, or nil
	ready chan struct{} // closed once Run has made rn
	rn    *runner
	glue  atomic.Pointer[engine.Candidate] // rn's, for Status

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
	var s Status
	if g := c.glue.Load(); g != nil {
		e := g.Status()
		s = Status{Leader: e.Leader, Leading: e.Leading, Token: e.Token, Deadline: e.Deadline, Err: e.Err, Standby: e.Standby, Jeopardy: e.Jeopardy}
	}
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
	r := &runner{c: c, runCtx: ctx, dispWake: make(chan struct{}, 1), notifyWake: make(chan struct{}, 1)}
	r.h = host.New(host.Config{
		Clock: c.cfg.Clock, Store: c.cfg.Store,
		Context: context.WithoutCancel(ctx), // ctx's values reach the store; the release outlives ctx
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			c.ms.storeCall(opName(kind), err, took)
			c.answered.note(c.cfg.Clock, err)
		},
		After: r.after,
	})
	if err := r.newRun(m); err != nil {
		return err
	}
	c.rn = r
	c.glue.Store(r.g)
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

// runner carries out one Run: a host (internal/host) running the run's
// glue (engine.Candidate: the lease's entry and the standby's, the terms'
// contexts, the callbacks' queues, the wake-ups), on the goroutine that
// called Run. It is the glue's shell: the callbacks run on a goroutine of
// their own, OnLeaderChange on another, and wake-ups and notices go out
// over the network.
type runner struct {
	c       *Candidate
	h       *host.Host
	g       *engine.Candidate
	run     *engine.Run    // g's
	d       *driver.Driver // run's
	runCtx  context.Context
	crashed *CallbackPanic // the first callback that panicked

	dispWake, notifyWake chan struct{} // size 1: a job queued, or the queue closed

	conn    seam.WakeConn // the wake-up listener; nil without one
	notices *sender       // renewal notices, one queued at most
}

func (r *runner) loop(ctx context.Context) error {
	cfg := &r.c.cfg
	r.h.Go(r.callbacks)
	if cfg.Callbacks.OnLeaderChange != nil {
		r.h.Go(r.leaderChanges)
	}
	stopFeed := r.startFeed()
	defer func() {
		stopFeed()
		if tc := r.g.Term(); tc != nil { // not reached: Stop ends the term
			tc.Cancel(errStopped)
		}
		r.g.Dispatch.Close()
		signal(r.dispWake)
		r.g.Notify.Close()
		signal(r.notifyWake)
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
	r.g.Exit()
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
	r.c.loopAt.Store(r.c.cfg.Clock.Now().UnixNano())
	if r.g.After() {
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

func (r *runner) panicked(p *CallbackPanic) { r.h.Do(func() { r.crash(p) }) }

var errStopped = errors.New("tenure: Run ended")

// stop ends the run: the term, then the release; and the standby campaign.
func (r *runner) stop() { r.run.Stop() }

// callbacks runs OnElected and OnDemoted as the glue queues them, one at
// a time, so that the loop that renews the lease never waits for one; and
// passes the barriers back to the loop.
func (r *runner) callbacks() {
	q, cb := &r.g.Dispatch, &r.c.cfg.Callbacks
	for {
		j, ok := q.Next(r.c.cfg.Clock.Now())
		if !ok {
			if q.Finished() {
				return
			}
			<-r.dispWake
			continue
		}
		ok = true
		switch j.Kind {
		case engine.JobElected:
			ok = call(j.Name(), func() { cb.OnElected(j.Ctx, j.Term) }, r.panicked)
		case engine.JobDemoted:
			ok = call(j.Name(), func() { cb.OnDemoted(j.Term, j.Reason) }, r.panicked)
		case engine.JobBarrier:
			r.h.Do(func() { r.d.Reached(j.Barrier) })
		}
		q.Done(!ok)
	}
}

// leaderChanges runs OnLeaderChange on a goroutine of its own, so that a
// slow one (it dials the new leader) never delays OnElected.
func (r *runner) leaderChanges() {
	q, f := &r.g.Notify, r.c.cfg.Callbacks.OnLeaderChange
	for {
		l, ok := q.Next()
		if !ok {
			if q.Finished() {
				return
			}
			<-r.notifyWake
			continue
		}
		q.Done(!call("OnLeaderChange", func() { f(l) }, r.panicked))
	}
}

// The engine.CandidateShell of a Run.

func (r *runner) Dispatched() { signal(r.dispWake) }
func (r *runner) Notified()   { signal(r.notifyWake) }

func (r *runner) Published(driver.Snapshot, bool) {}
func (r *runner) Hot(bool)                        {}

// ReadStandby reads the standby's record on a goroutine of its own, for a
// wake-up once the lease given back is confirmed.
func (r *runner) ReadStandby(p *engine.WakePlan) {
	cfg := &r.c.cfg
	r.h.Go(func() {
		// Not cancelled with the run: the release may well be confirmed
		// before this read is answered, and Run waits for it (OpTimeout).
		ctx, cancel := context.WithTimeout(seam.WakeRead(context.WithoutCancel(r.runCtx)), cfg.OpTimeout)
		rec, _, err := cfg.Store.Get(ctx, cfg.Lease+election.StandbySuffix)
		cancel()
		p.Read(rec, err)
	})
}

// SendWake sends the standby a wake-up: a datagram, which never waits.
func (r *runner) SendWake(addr string) {
	if err := wakeNet(r.c.cfg.Store).Send(addr, []byte(wakeMsg(r.c.cfg.Lease))); err != nil {
		r.log(slog.LevelDebug, "wake-up not sent", "addr", addr, "err", err)
		return
	}
	r.log(slog.LevelDebug, "woke the standby", "addr", addr)
}

// SendNotice queues a renewal notice to addr, dropping it if the one
// before is still on its way: the loop never waits on the network.
func (r *runner) SendNotice(addr string) {
	if r.notices != nil {
		r.notices.send(addr, noticeMsg(r.c.cfg.Lease))
	}
}

// log logs as the glue does, with the lease and the candidate's ID.
func (r *runner) log(level slog.Level, msg string, args ...any) {
	if r.g != nil {
		r.g.Log(level, msg, args...)
	} else if l := r.c.cfg.Logger; l != nil {
		l.Log(context.Background(), level, msg, append([]any{"lease", r.c.cfg.Lease, "id", r.c.cfg.ID}, args...)...)
	}
}
