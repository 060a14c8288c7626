package shell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

var (
	// ErrReleaseUnconfirmed is tenure.ErrReleaseUnconfirmed.
	ErrReleaseUnconfirmed = errors.New("tenure: release not confirmed")
	// ErrRunEnded is tenure.ErrRunEnded.
	ErrRunEnded = errors.New("tenure: Run has returned")
)

// CandidateConfig is what a Candidate's shell needs: tenure.Config,
// resolved, in the engine's terms.
type CandidateConfig struct {
	// Glue configures the run's glue. Its Parent, Meter and Observer are
	// the shell's to fill in, and so is its Run.Addr.
	Glue  engine.CandidateConfig
	Clock host.Clock
	Store lease.Store
	// WakeAddr and WakeAdvertise are Runtime's: with Glue.Run.Standby,
	// where to listen for wake-ups and renewal notices (a Priority
	// listens on DefaultWakeAddr unless NoWake).
	WakeAddr, WakeAdvertise string
	// The program's callbacks; nil for none.
	OnElected      func(context.Context, election.Term)
	OnDemoted      func(election.Term, election.Reason)
	OnLeaderChange func(election.Leader)
	// Panicked makes what Run panics with after callback panicked with
	// value: a *tenure.CallbackPanic.
	Panicked func(callback string, value any, stack []byte) any
	Metrics  *Metrics
}

// Candidate runs a tenure.Candidate's Run: a host (internal/host) with the
// run's glue (engine.Candidate) on the goroutine that calls Run, the
// callbacks on a goroutine of their own, OnLeaderChange on another, the
// wake-up listener and its sender, the store's change feed, and reads of
// the standby record. It is the glue's engine.CandidateShell.
type Candidate struct {
	cfg      CandidateConfig
	ready    chan struct{} // closed once Run has made the run
	glue     atomic.Pointer[engine.Candidate]
	running  atomic.Bool
	loopAt   atomic.Int64 // Unix nanoseconds of the loop's latest step, by the clock
	answered LastAnswer

	// The run's; set before ready is closed.
	h       *host.Host
	g       *engine.Candidate
	run     *engine.Run    // g's
	d       *driver.Driver // run's
	runCtx  context.Context
	crashed any // what Run panics with: the first callback that panicked

	dispWake, notifyWake chan struct{} // size 1: a job queued, or the queue closed

	conn    seam.WakeConn // the wake-up listener; nil without one
	notices *Sender       // renewal notices, one queued at most
}

// NewCandidate returns the shell of a Candidate configured by cfg.
func NewCandidate(cfg CandidateConfig) *Candidate {
	return &Candidate{cfg: cfg, ready: make(chan struct{}),
		dispWake: make(chan struct{}, 1), notifyWake: make(chan struct{}, 1)}
}

// Status returns what the glue published last; false before Run.
func (c *Candidate) Status() (engine.Status, bool) {
	g := c.glue.Load()
	if g == nil {
		return engine.Status{}, false
	}
	return g.Status(), true
}

// LastAnswer returns when the store last answered one of the run's calls.
func (c *Candidate) LastAnswer() time.Time { return c.answered.Get() }

// Running reports whether Run runs, and when its loop stepped last.
func (c *Candidate) Running() (bool, time.Time) {
	return c.running.Load(), time.Unix(0, c.loopAt.Load())
}

// Resign ends the current term, if any, and gives the lease back, staying
// a follower for holdOff (tenure.Candidate.Resign). It waits for Run to
// be running, and returns ErrRunEnded once Run has returned.
func (c *Candidate) Resign(ctx context.Context, holdOff time.Duration) error {
	done := make(chan struct{})
	select {
	case <-c.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !c.h.Do(func() { c.run.Resign(holdOff, func() { close(done) }) }) {
		return ErrRunEnded // a caller that meant to hand over should know it did not
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run runs Machine m until ctx is done, as tenure.Candidate.Run does; obs
// is the simulator's observer, or nil. Call it once.
func (c *Candidate) Run(ctx context.Context, m driver.Machine, obs seam.Observer) error {
	cfg := &c.cfg
	c.runCtx = ctx
	c.h = host.New(host.Config{
		Clock: cfg.Clock, Store: cfg.Store,
		Context: context.WithoutCancel(ctx), // ctx's values reach the store; the release outlives ctx
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			cfg.Metrics.StoreCall(kind, err, took)
			c.answered.Note(cfg.Clock, err)
		},
		After: c.after,
	})
	gc := cfg.Glue
	gc.Parent, gc.Meter, gc.Observer = ctx, cfg.Metrics, obs
	if gc.Run.Standby {
		addr, err := c.startListener()
		if err != nil {
			return err
		}
		gc.Run.Addr = addr
	}
	c.g = engine.NewCandidate(c.h.Core, m, gc, c)
	c.run = c.g.Run()
	c.d = c.run.Driver()
	c.glue.Store(c.g)
	close(c.ready)
	c.loopAt.Store(cfg.Clock.Now().UnixNano())
	c.running.Store(true)
	defer c.running.Store(false)
	return c.loop(ctx)
}

func (c *Candidate) loop(ctx context.Context) error {
	cfg := &c.cfg
	c.h.Go(c.callbacks)
	if cfg.OnLeaderChange != nil {
		c.h.Go(c.leaderChanges)
	}
	stopFeed := c.startFeed()
	defer func() {
		stopFeed()
		if tc := c.g.Term(); tc != nil { // not reached: Stop ends the term
			tc.Cancel(errStopped)
		}
		c.g.Dispatch.Close()
		signal(c.dispWake)
		c.g.Notify.Close()
		signal(c.notifyWake)
		if c.conn != nil {
			_ = c.conn.Close()
		}
		c.h.Wait()
	}()
	c.run.Start()
	c.after()
	c.h.Run(ctx.Done(), c.stop)
	if err := c.run.Err(); err != nil {
		return err
	}
	c.g.Exit()
	if c.crashed != nil {
		panic(c.crashed)
	}
	if c.d.GaveUp() {
		cause := c.d.Machine().Err()
		if cause == nil {
			cause = errors.New("no answer from the store")
		}
		c.log(slog.LevelWarn, "release not confirmed; the lease will expire", "err", cause)
		return fmt.Errorf("%w: lease %q within %v: %w", ErrReleaseUnconfirmed, cfg.Glue.Run.Lease, cfg.Glue.Run.ReleaseTimeout, cause)
	}
	return nil
}

// after runs on the loop after each event.
func (c *Candidate) after() {
	c.loopAt.Store(c.cfg.Clock.Now().UnixNano())
	if c.g.After() {
		c.h.Exit()
	}
}

// crash ends the run after a callback panicked: the first panic is
// Run's.
func (c *Candidate) crash(callback string, value any, stack []byte) {
	if c.crashed != nil {
		return
	}
	c.crashed = c.cfg.Panicked(callback, value, stack)
	c.log(slog.LevelError, "callback panicked; ending the term and releasing the lease", "callback", callback, "panic", fmt.Sprint(value))
	c.stop()
}

func (c *Candidate) panicked(callback string, value any, stack []byte) {
	c.h.Do(func() { c.crash(callback, value, stack) })
}

var errStopped = errors.New("tenure: Run ended")

// stop ends the run: the term, then the release; and the standby campaign.
func (c *Candidate) stop() { c.run.Stop() }

// callbacks runs OnElected and OnDemoted as the glue queues them, one at
// a time, so that the loop that renews the lease never waits for one; and
// passes the barriers back to the loop.
func (c *Candidate) callbacks() {
	q, cfg := &c.g.Dispatch, &c.cfg
	for {
		j, ok := q.Next(cfg.Clock.Now())
		if !ok {
			if q.Finished() {
				return
			}
			<-c.dispWake
			continue
		}
		ok = true
		switch j.Kind {
		case engine.JobElected:
			ok = call(j.Name(), func() { cfg.OnElected(j.Ctx, j.Term) }, c.panicked)
		case engine.JobDemoted:
			ok = call(j.Name(), func() { cfg.OnDemoted(j.Term, j.Reason) }, c.panicked)
		case engine.JobBarrier:
			c.h.Do(func() { c.d.Reached(j.Barrier) })
		}
		q.Done(!ok)
	}
}

// leaderChanges runs OnLeaderChange on a goroutine of its own, so that a
// slow one (it dials the new leader) never delays OnElected.
func (c *Candidate) leaderChanges() {
	q, f := &c.g.Notify, c.cfg.OnLeaderChange
	for {
		l, ok := q.Next()
		if !ok {
			if q.Finished() {
				return
			}
			<-c.notifyWake
			continue
		}
		q.Done(!call("OnLeaderChange", func() { f(l) }, c.panicked))
	}
}

// call runs f and reports whether it returned; a panic is passed to
// panicked, with the goroutine's stack, and reported as false.
func call(name string, f func(), panicked func(callback string, value any, stack []byte)) (ok bool) {
	defer func() {
		if !ok {
			panicked(name, recover(), debug.Stack())
		}
	}()
	f()
	return true
}

// signal wakes the goroutine waiting on ch, a channel of size 1, or
// leaves it woken.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// startListener listens for wake-ups and renewal notices (with WakeAddr,
// or a Priority) and returns the address to publish; "" for none.
func (c *Candidate) startListener() (string, error) {
	cfg := &c.cfg
	listen := cfg.WakeAddr
	if listen == "" && cfg.Glue.Run.Preference.Priority != 0 {
		listen = DefaultWakeAddr(cfg.Store) // a preferred standby must be woken to be first at the release
	}
	if listen == "" || listen == NoWake {
		return "", nil
	}
	conn, addr, err := WakeNet(cfg.Store).Listen(listen, cfg.WakeAdvertise)
	if err != nil && cfg.WakeAddr != "" {
		return "", err
	}
	if err != nil { // not asked for: go on without, as with NoWake
		c.log(slog.LevelWarn, "no wake-ups: a hand-over's release is found at the next poll (set WakeAddr)", "err", err)
		return "", nil
	}
	c.conn = conn
	c.notices = NewSender(conn, 1, c.log)
	c.h.Go(c.listen)
	c.h.Go(func() { c.notices.Run(c.h.Quit()) })
	c.log(slog.LevelInfo, "listening for wake-ups", "addr", conn.Addr(), "advertised", addr)
	return addr, nil
}

// listen passes wake-ups and renewal notices for this lease to the loop
// until the listener is closed. Anything else that arrives is dropped.
func (c *Candidate) listen() {
	name := c.cfg.Glue.Run.Lease
	wake := WakeMsg(name)
	// Room for a notice that tells its renewal (RenewalMsg): a version,
	// a token, a duration and a holder's ID in hex.
	buf := make([]byte, max(len(wake), len(NoticeMsg(name)))+1024)
	for {
		n, err := c.conn.Recv(buf)
		if err != nil {
			return // closed
		}
		var f func()
		if string(buf[:n]) == wake {
			f = func() { c.g.Woken() }
		} else if r, ok := ParseNotice(name, buf[:n]); ok {
			f = func() { c.g.NoticedRenewal(r) }
		} else {
			continue
		}
		if !c.h.Do(f) {
			return // the run is over
		}
	}
}

// startFeed listens to the store's change feed for the lease, when the
// store has one (lease.Watcher), and passes its events to the glue
// (engine.Candidate.FeedEvent), so that a follower reads a round trip after
// each renewal and after a release, without anyone's address. It returns
// the function that stops it; Run calls it before waiting for its
// goroutines.
func (c *Candidate) startFeed() (stop func()) {
	w, ok := c.cfg.Store.(lease.Watcher)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.runCtx))
	c.h.Go(func() {
		err := w.Watch(ctx, c.cfg.Glue.Run.Lease, func(ev lease.Event) {
			if !c.h.Do(func() { c.g.FeedEvent(ev) }) {
				cancel() // the run is over
			}
		})
		c.g.FeedDown()
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			c.log(slog.LevelWarn, "no change feed from the store: following by polls", "err", err)
		}
	})
	if c.g.StandbyFeed() {
		// The standby record's writes too: a leader reads it on them,
		// not once a cold poll.
		c.h.Go(func() {
			_ = w.Watch(ctx, c.cfg.Glue.Run.Lease+election.StandbySuffix, func(ev lease.Event) {
				if !c.h.Do(func() { c.g.StandbyFeedEvent(ev) }) {
					cancel()
				}
			})
			c.h.Do(func() { c.g.StandbyFeedDown() })
		})
	}
	return cancel
}

// The engine.CandidateShell of a Run.

// Dispatched and Notified wake the callbacks' goroutines.
func (c *Candidate) Dispatched() { signal(c.dispWake) }
func (c *Candidate) Notified()   { signal(c.notifyWake) }

// Published and Hot need nothing more here: Status reads the glue.
func (c *Candidate) Published(driver.Snapshot, bool) {}
func (c *Candidate) Hot(bool)                        {}

// ReadStandby reads the standby's record on a goroutine of its own, for a
// wake-up once the lease given back is confirmed.
func (c *Candidate) ReadStandby(p *engine.WakePlan) {
	name, timeout := c.cfg.Glue.Run.Lease+election.StandbySuffix, c.cfg.Glue.OpTimeout
	c.h.Go(func() {
		// Not cancelled with the run: the release may well be confirmed
		// before this read is answered, and Run waits for it (OpTimeout).
		ctx, cancel := context.WithTimeout(seam.WakeRead(context.WithoutCancel(c.runCtx)), timeout)
		rec, _, err := c.cfg.Store.Get(ctx, name)
		cancel()
		p.Read(rec, err)
	})
}

// SendWake sends the standby a wake-up: a datagram, which never waits.
func (c *Candidate) SendWake(addr string) {
	if err := WakeNet(c.cfg.Store).Send(addr, []byte(WakeMsg(c.cfg.Glue.Run.Lease))); err != nil {
		c.log(slog.LevelDebug, "wake-up not sent", "addr", addr, "err", err)
		return
	}
	c.log(slog.LevelDebug, "woke the standby", "addr", addr)
}

// SendNotice queues a renewal notice to addr, telling r (RenewalMsg),
// dropping it if the one
// before is still on its way: the loop never waits on the network.
func (c *Candidate) SendNotice(addr string, r engine.Renewal) {
	if c.notices != nil {
		c.notices.Send(addr, RenewalMsg(c.cfg.Glue.Run.Lease, r))
	}
}

// log logs as the glue does, with the lease and the candidate's ID.
func (c *Candidate) log(level slog.Level, msg string, args ...any) {
	if g := c.glue.Load(); g != nil {
		g.Log(level, msg, args...)
	} else if l := c.cfg.Glue.Logger; l != nil {
		l.Log(context.Background(), level, msg, append([]any{"lease", c.cfg.Glue.Run.Lease, "id", c.cfg.Glue.Run.ID}, args...)...)
	}
}
