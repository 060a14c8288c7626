package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
)

// ErrRunning is returned by a second call to Run: a Candidate runs once.
var ErrRunning = errors.New("tenure: Run already called on this Candidate")

// Candidate campaigns for one lease. Create it with New and call Run.
type Candidate struct {
	cfg     Config // validated
	started atomic.Bool

	mu     sync.Mutex // guards status
	status Status
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
	// cleared by the next successful call.
	Err error
}

// New returns a Candidate for cfg, after cfg.Validate filled in its defaults.
func New(cfg Config) (*Candidate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Candidate{cfg: cfg}, nil
}

// ID returns the identity this candidate writes into the lease.
func (c *Candidate) ID() string { return c.cfg.ID }

// Status returns what the candidate knows now. It is safe to call at any time
// from any goroutine.
func (c *Candidate) Status() Status {
	c.mu.Lock()
	s := c.status
	c.mu.Unlock()
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
// not held, or an error if the release could not be confirmed in time (the
// lease then expires on its own). It returns only after every goroutine it
// started has exited.
func (c *Candidate) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	m, err := election.New(c.cfg.machineConfig())
	if err != nil {
		return fmt.Errorf("tenure: %w", err) // Validate already passed: not reached
	}
	r := &runner{c: c, m: m, results: make(chan election.Result), quit: make(chan struct{}), disp: newDispatcher()}
	return r.run(ctx)
}

// runner carries out one Run: it owns the Machine and feeds it time and the
// results of store calls, on the goroutine that called Run.
type runner struct {
	c       *Candidate
	m       *election.Machine
	disp    *dispatcher
	results chan election.Result // store call results; senders give up on quit
	quit    chan struct{}        // closed when the loop stops listening
	wg      sync.WaitGroup       // every goroutine Run started

	runCtx   context.Context
	opBase   context.Context    // parent of store call contexts: outlives runCtx for the release
	opID     uint64             // the call in flight
	cancelOp context.CancelFunc // cancels it

	term       Term
	cancelTerm context.CancelFunc // nil outside a term

	wake  time.Time
	wakeC <-chan time.Time
	done  bool
}

func (r *runner) run(ctx context.Context) error {
	cfg := &r.c.cfg
	r.runCtx = ctx
	opBase, cancelAll := context.WithCancel(context.WithoutCancel(ctx))
	r.opBase = opBase
	r.wg.Go(r.disp.run)
	defer func() {
		cancelAll()
		close(r.quit)
		if r.cancelTerm != nil { // not reached: Stop ends the term
			r.cancelTerm()
		}
		r.disp.close()
		r.wg.Wait()
	}()

	r.apply(r.m.Start(cfg.Clock.Now()))
	stop := ctx.Done()
	var drained <-chan struct{}
	var giveUp <-chan time.Time
	for !r.done {
		select {
		case <-stop:
			stop = nil
			r.apply(r.m.Stop(cfg.Clock.Now()))
			drained = r.disp.barrier() // release only after the callbacks returned
		case <-drained:
			drained = nil
			giveUp = cfg.Clock.After(cfg.ReleaseTimeout)
			r.apply(r.m.Release(cfg.Clock.Now()))
		case <-giveUp:
			err := r.m.Err()
			if err == nil {
				err = errors.New("timed out")
			}
			r.log(slog.LevelWarn, "release not confirmed; the lease will expire", "err", err)
			return fmt.Errorf("tenure: release lease %q within %v: %w", cfg.Lease, cfg.ReleaseTimeout, err)
		case <-r.wakeC:
			r.wakeC = nil
			r.apply(r.m.Tick(cfg.Clock.Now()))
		case res := <-r.results:
			r.apply(r.m.Done(cfg.Clock.Now(), res))
		}
	}
	return nil
}

// apply carries out an Output.
func (r *runner) apply(out election.Output) {
	if out.Abandon != 0 && out.Abandon == r.opID {
		r.cancelOp()
	}
	if out.Op != nil {
		r.start(*out.Op)
	}
	r.publish() // before any callback runs, so that callbacks see it
	for _, e := range out.Events {
		r.event(e)
	}
	r.done = out.Done
	switch {
	case out.Wake.IsZero():
		r.wakeC = nil
	case r.wakeC == nil || !out.Wake.Equal(r.wake):
		r.wake = out.Wake
		r.wakeC = r.c.cfg.Clock.After(out.Wake.Sub(r.c.cfg.Clock.Now()))
	}
}

// start runs a store call on a goroutine of its own, so that the loop keeps
// time (and ends a term at its deadline) while the store is slow.
func (r *runner) start(op election.Op) {
	cfg := &r.c.cfg
	ctx, cancel := context.WithCancel(r.opBase)
	r.opID, r.cancelOp = op.ID, cancel
	rec := op.Record
	rec.WrittenAt = cfg.Clock.Now().Round(0).UTC()
	r.wg.Go(func() {
		defer cancel()
		res := election.Result{ID: op.ID}
		switch op.Kind {
		case election.OpGet:
			res.Record, res.Version, res.Err = cfg.Store.Get(ctx, cfg.Lease)
		case election.OpPut:
			res.Version, res.Err = cfg.Store.Put(ctx, cfg.Lease, rec, op.Expect)
		}
		select {
		case r.results <- res:
		case <-r.quit:
		}
	})
}

func (r *runner) event(e election.Event) {
	cfg := &r.c.cfg
	cb := cfg.Callbacks
	switch e.Kind {
	case election.EventElected:
		term := Term{Lease: cfg.Lease, Holder: cfg.ID, Token: fencing.Token(e.Term.Token), Deadline: e.Term.Deadline, Payload: cfg.Payload}
		ctx, cancel := context.WithCancel(fencing.NewContext(r.runCtx, term.Fence()))
		r.term, r.cancelTerm = term, cancel
		r.log(slog.LevelInfo, "elected", "token", term.Token)
		if cb.OnElected != nil {
			r.disp.push(func() { cb.OnElected(ctx, term) })
		}
	case election.EventDemoted:
		r.cancelTerm() // before OnDemoted is even queued
		r.cancelTerm = nil
		term, reason := r.term, DemotionReason(e.Reason)
		r.log(slog.LevelInfo, "demoted", "token", term.Token, "reason", reason.String())
		if cb.OnDemoted != nil {
			r.disp.push(func() { cb.OnDemoted(term, reason) })
		}
	case election.EventLeaderChanged:
		l := Leader{ID: e.Leader.Holder, Token: fencing.Token(e.Leader.Token), Payload: e.Leader.Payload}
		r.log(slog.LevelDebug, "leader changed", "leader", l.ID, "token", l.Token)
		if cb.OnLeaderChange != nil {
			r.disp.push(func() { cb.OnLeaderChange(l) })
		}
	}
}

// publish updates the snapshot Status reads.
func (r *runner) publish() {
	l := r.m.Leader()
	s := Status{
		Leader: Leader{ID: l.Holder, Token: fencing.Token(l.Token), Payload: l.Payload},
		Err:    r.m.Err(),
	}
	if t, ok := r.m.Term(); ok {
		s.Leading, s.Token, s.Deadline = true, fencing.Token(t.Token), t.Deadline
	}
	r.c.mu.Lock()
	prev := r.c.status.Err
	r.c.status = s
	r.c.mu.Unlock()
	if s.Err != nil && (prev == nil || prev.Error() != s.Err.Error()) {
		r.log(slog.LevelWarn, "store error", "err", s.Err)
	}
}

func (r *runner) log(level slog.Level, msg string, args ...any) {
	if l := r.c.cfg.Logger; l != nil {
		l.Log(context.Background(), level, msg, append([]any{"lease", r.c.cfg.Lease, "id", r.c.cfg.ID}, args...)...)
	}
}
