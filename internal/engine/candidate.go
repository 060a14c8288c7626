package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

// Candidate is the glue of one Run of a tenure.Candidate, without
// goroutines: the run's RunEffects, and what the API hands out around it.
// It opens and ends the terms' contexts (TermContext) and follows their
// jeopardy; queues the callbacks in order (Dispatch) and the leader's
// changes, coalesced (Notify); keeps the status; plans the standby's
// wake-up for a release (WakePlan) and sends renewal notices unless the
// store's change feed tells of the renewals; takes wake-ups, notices and
// feed events; and logs and counts what happens. A CandidateShell runs the
// callbacks and carries the messages: tenure.Candidate's goroutines, or
// the simulator's single thread, which both run this code as it is. Every
// method but those of Dispatch, Notify, Status and WakePlan.Read belongs
// to the host's loop.
type Candidate struct {
	cfg CandidateConfig
	sh  CandidateShell
	run *Run
	d   *driver.Driver

	// Dispatch and Notify are the callbacks' queues; the shell runs what
	// they hand out.
	Dispatch Dispatch
	Notify   Notify

	mu     sync.Mutex // guards status
	status Status

	term election.Term
	tctx *TermContext // nil outside a term
	last *TermContext // the latest term's, ended or not

	plan *WakePlan // the standby's wake-up planned for the release under way; nil if none

	warnAt  time.Time // next warning about a wedged OnElected
	errAt   time.Time // when the current store error was last logged
	lastErr string
	outage  time.Time // when the store errors began; zero: it answers
	flood   FloodGuard

	anomalyAt   time.Time // when lastAnomaly was last logged
	lastAnomaly string

	feedLive  atomic.Bool        // the store's change feed tells of the lease's writes
	listening bool               // the feed's first event ("listening") came
	feedWake  lockcore.WakeLimit // releases the feed tells of (FeedEvent)
}

// CandidateConfig is what a Candidate needs beyond its Machine.
type CandidateConfig struct {
	Run                              RunConfig
	Payload                          []byte
	LeaseDuration, OpTimeout, Margin time.Duration
	// Parent is the context the terms' contexts descend from: Run's.
	Parent context.Context
	Clock  Clock
	Logger *slog.Logger // nil: none
	Meter  Meter        // nil: none
	// Observer hears of terms, wake-ups and hand-overs as they happen:
	// the simulator's; nil for none.
	Observer seam.Observer
	// Ended makes the cause of an ended term's context
	// (tenure.TermEndedError).
	Ended func(lease string, token fencing.Token, reason election.Reason) error
	// The callbacks the program set: only those are queued.
	OnElected, OnDemoted, OnLeaderChange bool
}

// CandidateShell is what a Candidate asks of the process around it. Its
// methods run on the host's loop, within an event, but for SendWake,
// which may run on the goroutine that answered a WakePlan's read.
type CandidateShell interface {
	// Dispatched: a job was queued on Dispatch. Notified: a leader on
	// Notify.
	Dispatched()
	Notified()
	// ReadStandby reads the standby record for p, and hands the answer
	// to p.Read, on any goroutine.
	ReadStandby(p *WakePlan)
	// SendWake sends the standby at addr a wake-up; SendNotice a renewal
	// notice. Neither waits on the network.
	SendWake(addr string)
	SendNotice(addr string, r Renewal)
	// Published tells of a step of the lease's Machine, after the status
	// took it; Hot of a change of being the standby.
	Published(s driver.Snapshot, standby bool)
	Hot(hot bool)
}

// Status is what the Candidate knows now (tenure.Status, but for the time
// the store last answered).
type Status struct {
	Leader      election.Leader
	LeaderUntil time.Time    // Leader's term is not known to be live from then on
	Term        *TermContext // the current term's context, while there is one
	Leading     bool
	Token       fencing.Token
	Deadline    time.Time
	Err         error
	Standby     bool
	Jeopardy    time.Time
}

// NewCandidate returns the glue of a run of m, on core, telling sh.
func NewCandidate(core *host.Core, m driver.Machine, cfg CandidateConfig, sh CandidateShell) *Candidate {
	c := &Candidate{cfg: cfg, sh: sh}
	if c.cfg.Meter == nil {
		c.cfg.Meter = NoMeter{}
	}
	c.run = NewRun(core, (*candidateFx)(c), m, cfg.Run)
	c.d = c.run.Driver()
	return c
}

// Run returns the run the glue is the effects of.
func (c *Candidate) Run() *Run { return c.run }

// Driver returns the lease's driver.
func (c *Candidate) Driver() *driver.Driver { return c.run.Driver() }

// Status returns the status the latest step published. It is safe to call
// from any goroutine.
func (c *Candidate) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Term returns the context of the current term, or nil.
func (c *Candidate) Term() *TermContext { return c.tctx }

// LastTerm returns the context of the latest term, ended or not; nil
// before the first.
func (c *Candidate) LastTerm() *TermContext { return c.last }

// After settles an event of the host's loop: the run's entries, and a
// warning about an OnElected that outlives its term. It reports whether
// the run is over.
func (c *Candidate) After() bool {
	over := c.run.After()
	c.checkWedged()
	return over
}

// Exit settles the run once the host's loop has returned: a lease given
// back wakes the standby, and a wake-up planned for a release never
// confirmed is dropped.
func (c *Candidate) Exit() {
	c.run.Finish()
	if p := c.plan; p != nil {
		c.plan = nil
		p.quit()
	}
}

// Woken takes a wake-up: the lease is read now, within the rate limit.
// It reports whether it is.
func (c *Candidate) Woken() bool {
	if !c.run.Woken() {
		c.log(slog.LevelDebug, "wake-up dropped: over the rate limit")
		return false
	}
	if o := c.cfg.Observer; o != nil {
		o.Woken()
	}
	c.log(slog.LevelDebug, "woken: reading the lease")
	return true
}

// Noticed takes a renewal notice of version v (NoVersion: unknown): the
// Machine rate-limits it.
func (c *Candidate) Noticed(v lease.Version) { c.run.Noticed(v) }

// NoticedRenewal takes a renewal notice that tells the renewal's version
// and term: a standby that read that term times the lease from it, and
// reads otherwise (election.Machine.NoticeRecord).
func (c *Candidate) NoticedRenewal(r Renewal) {
	if r.Version == lease.NoVersion {
		c.run.Noticed(lease.NoVersion)
		return
	}
	c.run.NoticedRecord(r.Version, lease.Record{Holder: r.Holder, Token: r.Token, Duration: r.Duration})
}

// FeedEvent takes an event of the store's change feed: a write that
// carries its record is timed by a follower that read the term it renews
// (election.Machine.NoticeRecord), any other write is a renewal notice (the
// Machine rate-limits them, and cold, gated or leading machines ignore
// them), a release a wake-up where the candidate takes
// them, else a read now within a wake-up's rate limit of its own (the
// notices' could be spent on the renewals just read: a handoff must not
// wait a poll). The feed's first event, "listening", is dropped: the run
// read as it started.
func (c *Candidate) FeedEvent(ev lease.Event) {
	if !c.listening {
		c.listening = true
		if ev.Version == lease.NoVersion && !ev.Released {
			return
		}
	}
	c.feedLive.Store(true)
	switch {
	case !ev.Released && ev.Record != nil:
		c.run.NoticedRecord(ev.Version, *ev.Record)
	case !ev.Released:
		c.run.Noticed(ev.Version)
	case c.Woken():
	case c.feedWake.Allow(c.cfg.Clock.Now()):
		c.d.Hint()
	default:
		c.run.Noticed(lease.NoVersion) // a notice then, within the notices' rate limit
	}
}

// FeedDown says the store's change feed stopped telling of writes: the
// leader's renewal notices go out again.
func (c *Candidate) FeedDown() { c.feedLive.Store(false) }

// StandbyFeed reports whether the run has a standby record whose writes a
// change feed should tell of (StandbyFeedEvent).
func (c *Candidate) StandbyFeed() bool { return c.run.sb != nil }

// StandbyFeedEvent takes an event of the store's change feed for the
// standby record: a leader reads the record on it, and not on a timer
// while the feed runs (standby.Standby.Fed).
func (c *Candidate) StandbyFeedEvent(lease.Event) {
	if sb := c.run.sb; sb != nil {
		sb.s.Fed(true)
		sb.s.Told()
	}
}

// StandbyFeedDown says the standby record's feed stopped: a leader reads
// the record once a cold poll again.
func (c *Candidate) StandbyFeedDown() {
	if sb := c.run.sb; sb != nil {
		sb.s.Fed(false)
	}
}

// checkWedged warns while OnElected of an ended term keeps running: the
// candidate does not campaign meanwhile, so nobody here does the leader's
// work. The first warning comes Margin after the term ended, then one every
// LeaseDuration.
func (c *Candidate) checkWedged() {
	ended, held := c.d.Held()
	if !held {
		return
	}
	name, since := c.Dispatch.Busy()
	if name != "OnElected" {
		return
	}
	now := c.cfg.Clock.Now()
	if now.Before(c.warnAt) {
		return
	}
	c.warnAt = now.Add(c.cfg.LeaseDuration)
	c.log(slog.LevelWarn, "OnElected still running after its term ended; not campaigning until it returns",
		"token", c.term.Token, "running", now.Sub(since).String(), "ended", now.Sub(ended).String())
}

// logErr logs a store error when it first appears and, while it persists,
// again once a minute (or once a lease, if longer): a permanent error at
// error level, others as warnings.
func (c *Candidate) logErr(err error) {
	now := c.cfg.Clock.Now()
	if err == nil {
		if !c.outage.IsZero() {
			c.log(slog.LevelWarn, "store answers again", "after", now.Sub(c.outage).Round(time.Millisecond).String())
		}
		c.lastErr, c.outage = "", time.Time{}
		return
	}
	if errors.As(err, new(*election.DuplicateIDError)) {
		return // Anomaly logs it
	}
	if c.outage.IsZero() {
		c.outage = now
	}
	if msg := err.Error(); msg != c.lastErr || !now.Before(c.errAt.Add(max(time.Minute, c.cfg.LeaseDuration))) {
		c.lastErr, c.errAt = msg, now
		level := slog.LevelWarn
		if errors.Is(err, lease.ErrPermanent) {
			level = slog.LevelError
		}
		c.log(level, "store error", "err", err)
	}
}

// Log logs with the lease and the candidate's ID, repeats of warnings
// held back. It is safe to call from any goroutine.
func (c *Candidate) Log(level slog.Level, msg string, args ...any) { c.log(level, msg, args...) }

func (c *Candidate) log(level slog.Level, msg string, args ...any) {
	if l := c.cfg.Logger; l != nil {
		c.flood.Log(l, c.cfg.Clock.Now(), level, msg, append([]any{"lease", c.cfg.Run.Lease, "id", c.cfg.Run.ID}, args...)...)
	}
}

// WakePlan is a wake-up of the standby planned for a lease this candidate
// gives back: the standby record is read at once, and the wake-up sent to
// the address it names once the release is confirmed, whichever comes
// last. A plan whose release the run never confirmed is dropped.
type WakePlan struct {
	c *Candidate

	mu       sync.Mutex // guards what follows
	addr     string     // the standby's, once read; "" for none
	read     bool       // the read was answered
	released bool       // the release was confirmed
	over     bool       // sent, or dropped
}

// Read takes the answer of the read of the standby record. It may run on
// any goroutine.
func (p *WakePlan) Read(rec lease.Record, err error) {
	c := p.c
	addr, _ := standby.Parse(rec.Payload)
	p.mu.Lock()
	p.read = true
	if err != nil || rec.Released || rec.Holder == c.cfg.Run.ID || addr == "" {
		p.over = true
		p.mu.Unlock()
		c.log(slog.LevelDebug, "no standby to wake", "holder", rec.Holder, "released", rec.Released, "err", err)
		return
	}
	p.addr = addr
	p.mu.Unlock()
	p.send()
}

// Settled reports whether the plan has nothing more to do: its read was
// answered, and the wake-up sent or dropped. The goroutine that reads for
// it may end then; Run waits for it.
func (p *WakePlan) Settled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.read && p.over
}

// release says the lease is given back, confirmed.
func (p *WakePlan) release() {
	p.mu.Lock()
	p.released = true
	p.mu.Unlock()
	p.send()
}

// quit drops the plan unless its release was confirmed.
func (p *WakePlan) quit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		p.over = true
	}
}

// send sends the wake-up once the standby is known and the release
// confirmed, once.
func (p *WakePlan) send() {
	p.mu.Lock()
	if p.over || !p.read || !p.released || p.addr == "" {
		p.mu.Unlock()
		return
	}
	p.over = true
	addr := p.addr
	p.mu.Unlock()
	p.c.sh.SendWake(addr)
}

// candidateFx is a Candidate's RunEffects.
type candidateFx Candidate

func (f *candidateFx) c() *Candidate { return (*Candidate)(f) }

func (f *candidateFx) Now() time.Time { return f.cfg.Clock.Now() }

func (f *candidateFx) Log(level slog.Level, msg string, args ...any) { f.c().log(level, msg, args...) }

func (f *candidateFx) Elected(t election.Term) {
	c := f.c()
	cfg := &c.cfg
	term := election.Term{Lease: cfg.Run.Lease, Holder: cfg.Run.ID, Token: t.Token, Deadline: t.Deadline, Payload: cfg.Payload}
	if _, ok := c.d.Machine().Term(); !ok {
		term.Deadline = time.Time{} // a Machine that keeps no term (the simulator's naive baseline): no deadline to check
	}
	tc := NewTermContext(cfg.Parent, term, cfg.Clock)
	c.term, c.tctx, c.last = term, tc, tc
	c.mu.Lock()
	c.status.Term = tc
	c.mu.Unlock()
	if now := cfg.Clock.Now(); !term.Deadline.IsZero() && t.Deadline.Sub(now) < cfg.OpTimeout {
		// Confirmed late, it begins in jeopardy: say so before OnElected
		// runs and can ask (the driver's Publish after this step says it
		// again, unchanged).
		since := FollowJeopardy(tc, now, driver.Snapshot{Leading: true, Term: t, Short: true}, cfg.Meter, c.log)
		c.mu.Lock()
		c.status.Jeopardy = since
		c.mu.Unlock()
	}
	c.log(slog.LevelInfo, "elected", "token", term.Token)
	cfg.Meter.Elected()
	if o := cfg.Observer; o != nil {
		o.Elected(t)
	}
	if cfg.OnElected {
		c.Dispatch.Push(Job{Kind: JobElected, Term: term, Ctx: tc})
		c.sh.Dispatched()
	}
}

func (f *candidateFx) Demoted(t election.Term, reason election.Reason) {
	c := f.c()
	cfg := &c.cfg
	term, tc := c.term, c.tctx
	FollowJeopardy(tc, cfg.Clock.Now(), driver.Snapshot{}, cfg.Meter, c.log) // over with the term
	tc.Announce()
	tc.Cancel(cfg.Ended(cfg.Run.Lease, term.Token, reason)) // before OnDemoted is even queued
	c.tctx = nil
	c.mu.Lock()
	c.status.Term = nil
	c.mu.Unlock()
	c.log(slog.LevelInfo, "demoted", "token", term.Token, "reason", reason.String())
	cfg.Meter.Demoted(reason)
	if o := cfg.Observer; o != nil {
		o.Demoted(t, reason)
	}
	if cfg.OnDemoted {
		c.Dispatch.Push(Job{Kind: JobDemoted, Term: term, Reason: reason, Ctx: tc})
		c.sh.Dispatched()
	}
	c.warnAt = cfg.Clock.Now().Add(cfg.Margin)
}

func (f *candidateFx) LeaderChanged(l election.Leader) {
	c := f.c()
	c.log(slog.LevelDebug, "leader changed", "leader", l.Holder, "token", l.Token)
	if c.cfg.OnLeaderChange {
		c.Notify.Push(l)
		c.sh.Notified()
	}
}

// Anomaly logs a lost or foreign record, or a duplicate ID, once and then
// once a minute (or a lease) while the same one persists: a duplicate ID
// is seen at every poll.
func (f *candidateFx) Anomaly(err error) {
	c := f.c()
	c.cfg.Meter.Anomaly()
	now := c.cfg.Clock.Now()
	if msg := err.Error(); msg != c.lastAnomaly || !now.Before(c.anomalyAt.Add(max(time.Minute, c.cfg.LeaseDuration))) {
		c.lastAnomaly, c.anomalyAt = msg, now
		c.log(slog.LevelError, "lease anomaly", "err", err)
	}
}

// Publish updates the status, and the deadline the term's context
// checks.
func (f *candidateFx) Publish(snap driver.Snapshot, isStandby bool) {
	c := f.c()
	s := Status{Leader: snap.Leader, LeaderUntil: snap.LeaderUntil, Term: c.tctx, Err: snap.Err, Standby: isStandby}
	if snap.Leading {
		s.Leading, s.Token, s.Deadline = true, snap.Term.Token, snap.Term.Deadline
	}
	if c.tctx != nil {
		s.Jeopardy = FollowJeopardy(c.tctx, c.cfg.Clock.Now(), snap, c.cfg.Meter, c.log)
	}
	c.mu.Lock()
	c.status = s
	c.mu.Unlock()
	if c.tctx != nil {
		c.tctx.Announce()
	}
	c.logErr(s.Err)
	c.sh.Published(snap, isStandby)
}

// Barrier queues b behind the callbacks queued so far.
func (f *candidateFx) Barrier(b driver.Barrier) {
	c := f.c()
	c.Dispatch.Push(Job{Kind: JobBarrier, Barrier: b})
	c.sh.Dispatched()
}

// Hot says whether this candidate is the standby, outside the driver's
// step.
func (f *candidateFx) Hot(hot bool) {
	c := f.c()
	c.mu.Lock()
	c.status.Standby = hot
	c.mu.Unlock()
	c.sh.Hot(hot)
}

// Notice sends a renewal notice to the standby's address, unless the
// store's change feed tells the followers of the renewals already.
func (f *candidateFx) Notice(addr string, r Renewal) {
	if !f.feedLive.Load() {
		f.sh.SendNotice(addr, r)
	}
}

// HandOver logs a hand-over to a standby of higher priority.
func (f *candidateFx) HandOver(holder string, priority int) {
	c := f.c()
	if o := c.cfg.Observer; o != nil {
		o.HandOver()
	}
	c.log(slog.LevelInfo, "handing the lease over to a candidate of higher priority", "standby", holder, "priority", priority, "ours", c.cfg.Run.Preference.Priority)
}

// PlanWake reads the standby's record now, to wake its holder once the
// lease given back is confirmed (WakeNow).
func (f *candidateFx) PlanWake() {
	c := f.c()
	p := &WakePlan{c: c}
	c.plan = p
	c.sh.ReadStandby(p)
}

// WakeNow: the lease was given back; the planned wake-up goes out once the
// standby is known.
func (f *candidateFx) WakeNow() {
	c := f.c()
	if p := c.plan; p != nil {
		c.plan = nil
		p.release()
	}
}
