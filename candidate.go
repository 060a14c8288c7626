package tenure

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

var (
	// ErrRunning is returned by a second call to Run: a Candidate runs once.
	ErrRunning = errors.New("tenure: Run already called on this Candidate")

	// ErrReleaseUnconfirmed is wrapped by Run's error when the release of the
	// lease was not confirmed within ReleaseTimeout. The lease then ends on
	// its own, a lease duration after the last renewal; the error also wraps
	// the last store error, which says why.
	ErrReleaseUnconfirmed = shell.ErrReleaseUnconfirmed

	// ErrRunEnded is returned by Resign once Run has returned: there is no
	// term to end, and the lease was given back when Run returned.
	ErrRunEnded = shell.ErrRunEnded
)

// Candidate campaigns for one lease. Create it with New and call Run.
type Candidate struct {
	cfg     Config // validated
	started atomic.Bool
	obs     seam.Observer // the simulator's, or nil
	sh      *shell.Candidate
	ms      *shell.Metrics
	meter   metric.Meter
}

func init() {
	seam.Observe = func(c any, o seam.Observer) { c.(*Candidate).obs = o }
}

// Status is a snapshot of what a Candidate knows.
type Status struct {
	// Leader is the leader as last observed in the store (maybe this
	// candidate); the zero Leader when there is none. Its Addr
	// (Config.Addr) is empty once its term is no longer known to be live:
	// a lease after this candidate first saw the record's last version,
	// by its own clock.
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
	c := &Candidate{cfg: cfg}
	if o, ok := cfg.Store.(seam.Observing); ok {
		c.obs = o.ObserveTerms(cfg.Lease)
	}
	if c.ms, c.meter, err = shell.NewMetrics(cfg.MeterProvider, attribute.String("lease", cfg.Lease)); err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	c.sh = shell.NewCandidate(c.shellConfig())
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
	req := resignReq{holdOff: c.cfg.ResignHoldOff}
	for _, o := range opts {
		o(&req)
	}
	return c.sh.Resign(ctx, req.holdOff)
}

// ResignOption changes one call of Resign.
type ResignOption func(*resignReq)

type resignReq struct{ holdOff time.Duration }

// HoldOff keeps the candidate a follower for d after this Resign, instead
// of Config.ResignHoldOff: a supervisor whose work keeps failing backs off
// this way, so that two candidates do not hand the lease back and forth.
func HoldOff(d time.Duration) ResignOption { return func(r *resignReq) { r.holdOff = max(d, 0) } }

// ID returns the identity this candidate writes into the lease.
func (c *Candidate) ID() string { return c.cfg.ID }

// LeaseDuration returns the lease this candidate asks for (its
// Timing.LeaseDuration, with the default filled in).
func (c *Candidate) LeaseDuration() time.Duration { return c.cfg.LeaseDuration }

// Status returns what the candidate knows now. It is safe to call at any time
// from any goroutine.
func (c *Candidate) Status() Status {
	e, _ := c.sh.Status()
	s := Status{Leader: e.Leader, Leading: e.Leading, Token: e.Token, Deadline: e.Deadline, Err: e.Err,
		LastAnswer: c.sh.LastAnswer(), Standby: e.Standby, Jeopardy: e.Jeopardy}
	now := c.cfg.Clock.Now()
	s.Leading = s.Leading && now.Before(s.Deadline)
	if !s.Leading {
		s.Token, s.Deadline = 0, time.Time{}
		if !now.Before(e.LeaderUntil) {
			s.Leader.Addr = "" // nobody is routed to a leader that may be gone
		}
	}
	return s
}

// TermContext returns the context of the current term while this
// candidate leads: the one OnElected got, done when the term ends, carrying
// its fence (fencing.FromContext). Code that serves requests on the leader
// (package forward) runs them under it.
func (c *Candidate) TermContext() (context.Context, bool) {
	e, _ := c.sh.Status()
	if e.Term == nil || e.Term.Err() != nil {
		return nil, false
	}
	return e.Term, true
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
	return c.sh.Run(ctx, m, c.obs)
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
			o.ObserveInt64(term, 1, metric.WithAttributes(c.ms.Base, attribute.String("token", strconv.FormatUint(uint64(st.Token), 10))))
		}
		o.ObserveInt64(leader, lead, c.ms.Opts)
		o.ObserveInt64(token, tok, c.ms.Opts)
		return nil
	}, leader, token, term)
}

// shellConfig is what the Candidate's shell runs: the lease's run and the
// standby's: with Config.Standby the campaign, with its wake-up listener
// (with WakeAddr, or a Priority); without, a leader's reads of the standby
// record, so that it hands over to a preferred standby (Config.Priority)
// and setting Priority on the candidate to prefer is enough. A name
// without room for the record has no standby to find.
func (c *Candidate) shellConfig() shell.CandidateConfig {
	cfg := &c.cfg
	rc := engine.RunConfig{
		Lease: cfg.Lease, ID: cfg.ID, ReleaseTimeout: cfg.ReleaseTimeout, ResignHoldOff: cfg.ResignHoldOff,
		Standby: cfg.Standby, Preference: standby.Preference{Priority: cfg.Priority, HoldOff: cfg.PriorityHoldOff},
	}
	if cfg.Standby || lease.ValidateName(cfg.Lease+election.StandbySuffix) == nil {
		sc := cfg.standbyConfig()
		rc.StandbyConfig = &sc
	}
	cb := cfg.Callbacks
	sc := shell.CandidateConfig{
		Glue: engine.CandidateConfig{
			Run: rc, Payload: cfg.Payload, LeaseDuration: cfg.LeaseDuration, OpTimeout: cfg.OpTimeout, Margin: cfg.Margin,
			Clock: cfg.Clock, Logger: cfg.Logger,
			Ended: func(lease string, token fencing.Token, reason election.Reason) error {
				return &TermEndedError{Lease: lease, Token: token, Reason: reason}
			},
			OnElected: cb.OnElected != nil, OnDemoted: cb.OnDemoted != nil, OnLeaderChange: cb.OnLeaderChange != nil,
		},
		Clock: cfg.Clock, Store: cfg.Store, WakeAddr: cfg.WakeAddr, WakeAdvertise: cfg.WakeAdvertise,
		OnElected: cb.OnElected, OnDemoted: cb.OnDemoted, OnLeaderChange: cb.OnLeaderChange,
		Panicked: func(callback string, value any, stack []byte) any {
			return &CallbackPanic{Callback: callback, Value: value, Stack: stack}
		},
		Metrics: c.ms,
	}
	return sc
}
