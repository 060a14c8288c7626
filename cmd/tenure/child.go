package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/tenure-go/tenure/internal/plan"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
)

// direct returns the file under w, if it is one: the child then writes to
// it itself (keeping its terminal, and no copy through tenure).
func direct(w io.Writer) io.Writer {
	if lw, ok := w.(*lockedWriter); ok {
		if f, ok := lw.w.(*os.File); ok {
			return f
		}
	}
	return w
}

// termDeadline remembers the last deadline a child's term had, kept once
// the term is over (the deadline then reads as zero).
type termDeadline struct {
	mu sync.Mutex // guards d
	d  time.Time
}

func (t *termDeadline) note(d time.Time) {
	if !d.IsZero() {
		t.mu.Lock()
		t.d = d
		t.mu.Unlock()
	}
}

// lastDeadline is the last deadline the term had, zero if none.
func (t *termDeadline) lastDeadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.d
}

// awaitOrKill waits for the child up to grace, then kills its tree.
func (c *child) awaitOrKill(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.kill()
		<-c.done
	}
}

// stop stops the command's tree for a term that ended: SIGTERM, SIGKILL
// after grace; at once if the term's deadline has passed already (tenure
// was stopped or starved, and another holder may be running).
func (c *child) stop(grace time.Duration, logf func(slog.Level, string, ...any)) {
	if d := c.lastDeadline(); !d.IsZero() && time.Now().After(d) {
		logf(slog.LevelWarn, "the term's deadline passed %v ago: killing the command's processes at once", time.Since(d).Round(time.Millisecond))
		c.kill()
		<-c.done
		return
	}
	logf(slog.LevelInfo, "stopping the command (SIGTERM, SIGKILL after %v)", grace)
	c.stopTree()
	c.awaitOrKill(grace + time.Second) // the supervisor kills at grace; this is if it cannot
}

// termOverLevel is the level at which a term's end is logged: a warning
// when it was lost, expired or cut off; information when it ended on
// purpose (shut down, resigned, handed over).
func termOverLevel(term context.Context) slog.Level {
	var te *tenure.TermEndedError
	if errors.As(context.Cause(term), &te) {
		switch te.Reason {
		case tenure.ReasonShutDown, tenure.ReasonResigned, tenure.ReasonHandedOver:
			return slog.LevelInfo
		}
	}
	return slog.LevelWarn
}

// outcome is how a supervised run of the child ended.
type outcome int

const (
	exited   outcome = iota + 1 // the child exited on its own
	ended                       // the term ended (or neared its deadline unrenewed): the child was stopped
	signaled                    // tenure got a signal: it was passed on, and the child is gone
)

// signals hands the OS signals tenure gets to the child running now, or,
// with none, to idle.
type signals struct {
	mu   sync.Mutex
	cur  chan os.Signal
	idle func(os.Signal)
}

func newSignals(idle func(os.Signal)) *signals {
	s := &signals{idle: idle}
	ch := make(chan os.Signal, 4)
	notify(ch)
	go func() {
		for sig := range ch {
			s.mu.Lock()
			if s.cur != nil {
				select {
				case s.cur <- sig:
				default:
				}
			} else if !suspend(nil, sig) {
				s.idle(sig)
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *signals) attach() chan os.Signal {
	ch := make(chan os.Signal, 4)
	s.mu.Lock()
	s.cur = ch
	s.mu.Unlock()
	return ch
}

func (s *signals) detach() {
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
}

// supervise watches c under a term: the child exits, the term's context
// ends, the term comes within early of its deadline (deadline(); zero when
// the term is over) without a renewal, or a signal comes. In the last three
// it stops the child (SIGTERM, or the signal as it came; SIGKILL after
// grace) and returns once the child and all it started are gone. It tells
// the supervisor each new deadline, so that the deadline holds even while
// tenure cannot act.
//
// logf logs at the level given: a term lost, a deadline near, a jeopardy
// are warnings; a shutdown asked for (a signal, a resign, a hand-over) is
// not.
func supervise(term context.Context, deadline func() time.Time, c *child, early, grace time.Duration, sigs *signals, onJeopardy os.Signal, logf func(slog.Level, string, ...any)) outcome {
	ch := sigs.attach()
	defer sigs.detach()
	wasIn := false // in jeopardy when last looked
	// Renewals move the deadline; the supervisor hears of each within a
	// tick, long before the old deadline's stop (a renewal comes a lead
	// window less a renew interval before it).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		d := deadline()
		c.setDeadline(d)
		j, in, jch := tenure.JeopardyOf(term)
		if in && !wasIn && onJeopardy != nil {
			logf(slog.LevelWarn, "renewals failing since %v; the term ends at %v unless one lands: sending %v to the command",
				j.Since.Format(time.RFC3339Nano), j.Deadline.Format(time.RFC3339Nano), onJeopardy)
			c.signal(onJeopardy)
		}
		wasIn = in
		var tc <-chan time.Time
		timer := time.NewTimer(max(time.Until(d.Add(-early)), 0))
		if !d.IsZero() && early > 0 {
			tc = timer.C
		}
		select {
		case <-c.done:
			timer.Stop()
			return exited
		case <-tick.C:
			timer.Stop()
		case <-jch:
			timer.Stop()
		case <-term.Done():
			timer.Stop()
			logf(termOverLevel(term), "term over (%v)", context.Cause(term))
			c.stop(grace, logf)
			return ended
		case <-tc:
			if !deadline().Equal(d) {
				continue // renewed meanwhile
			}
			logf(slog.LevelWarn, "no renewal %v before the term's deadline", early)
			c.stop(grace, logf)
			return ended
		case sig := <-ch:
			timer.Stop()
			switch {
			case suspend(c, sig):
				continue
			case passOn(sig):
				c.signal(sig)
				continue
			}
			logf(slog.LevelInfo, "got %v: passing it to the command's group (SIGKILL after %v)", sig, grace)
			c.signalGroup(sig)
			go func() { // a second signal kills at once
				select {
				case <-ch:
					c.kill()
				case <-c.done:
				}
			}()
			c.awaitOrKill(grace)
			return signaled
		}
	}
}

// stopTiming returns how long before a term's deadline the stop of the
// child begins when renewals fail: grace, so that SIGKILL comes by the
// deadline, unless that would cut into the time a late renewal still has
// (the lead window less a renewal interval and two operation timeouts),
// in which case SIGKILL may come after the deadline: overrun says by how
// much at most.
func stopTiming(ttl, grace time.Duration) (early, overrun time.Duration) {
	t := election.Timing{LeaseDuration: ttl}.WithDefaults()
	p, err := plan.New(t, 1, 0)
	if err != nil {
		return 0, grace
	}
	slack := max(p.LeadWindow-t.RenewInterval-2*t.OpTimeout, 0)
	early = min(grace, slack)
	return early, grace - early
}

// childEnv is what the child learns of its term. None of these names a
// flag of tenure's (TENURE_LEASE is --lease, a duration): a tenure command
// inside the job reads only what the operator set.
func childEnv(name, holder string, token uint64) []string {
	return []string{"TENURE_NAME=" + name, "TENURE_TOKEN=" + fmt.Sprint(token), "TENURE_HOLDER=" + holder}
}

// defaultGrace is --grace when not given: what fits before a term's
// deadline after a renewal fails (2.99s at a 10s lease), so that the
// command is gone before another process may take over.
func defaultGrace(ttl time.Duration) time.Duration {
	t := election.Timing{LeaseDuration: ttl}.WithDefaults()
	p, err := plan.New(t, 1, 0)
	if err != nil {
		return time.Second
	}
	return max(p.LeadWindow-t.RenewInterval-2*t.OpTimeout, 10*time.Millisecond)
}
