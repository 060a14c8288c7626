package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/election"
)

// child is the command tenure runs while it holds a lease or a lock, in a
// process group of its own so that a stop reaches everything it started.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
	err  error         // Wait's, once done
}

// startChild starts argv with env added to tenure's environment. The child
// shares tenure's stdin, stdout and stderr.
func startChild(argv, env []string, stdout, stderr io.Writer) (*child, error) {
	c := &child{done: make(chan struct{})}
	started := make(chan error, 1)
	// The goroutine that starts the child also waits for it, locked to its
	// thread: on Linux the child's parent-death signal follows the thread
	// that forked it.
	go func() {
		lockThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, direct(stdout), direct(stderr)
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.cmd = cmd
		started <- nil
		c.err = cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

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

// signal sends sig to the child's process group.
func (c *child) signal(sig os.Signal) {
	select {
	case <-c.done:
		return
	default:
	}
	signalGroup(c.cmd.Process, sig)
}

// stop sends SIGTERM to the group, then SIGKILL after grace, and returns
// once the child exited.
func (c *child) stop(grace time.Duration) {
	c.signal(syscall.SIGTERM)
	c.awaitOrKill(grace)
}

// awaitOrKill waits for the child up to grace, then kills its group.
func (c *child) awaitOrKill(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.signal(syscall.SIGKILL)
		<-c.done
	}
}

// status is the child's exit status as a shell reports it: its code, or
// 128 + the signal that killed it.
func (c *child) status() int {
	<-c.done
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		if sig, ok := exitSignal(ee); ok {
			return 128 + sig
		}
		return ee.ExitCode()
	}
	if c.err != nil {
		return 1
	}
	return 0
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
			} else {
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
// grace) and returns once the child is gone.
func supervise(term context.Context, deadline func() time.Time, c *child, early, grace time.Duration, sigs *signals, logf func(string, ...any)) outcome {
	ch := sigs.attach()
	defer sigs.detach()
	for {
		d := deadline()
		var tc <-chan time.Time
		timer := time.NewTimer(max(time.Until(d.Add(-early)), 0))
		if !d.IsZero() && early > 0 {
			tc = timer.C
		}
		select {
		case <-c.done:
			timer.Stop()
			return exited
		case <-term.Done():
			timer.Stop()
			logf("term over (%v): stopping the child (SIGTERM, SIGKILL after %v)", context.Cause(term), grace)
			c.stop(grace)
			return ended
		case <-tc:
			if !deadline().Equal(d) {
				continue // renewed meanwhile
			}
			logf("no renewal %v before the term's deadline: stopping the child (SIGTERM, SIGKILL after %v)", early, grace)
			c.stop(grace)
			return ended
		case sig := <-ch:
			timer.Stop()
			if passOn(sig) {
				c.signal(sig)
				continue
			}
			logf("got %v: passing it to the child (SIGKILL after %v)", sig, grace)
			c.signal(sig)
			go func() { // a second signal kills at once
				select {
				case <-ch:
					c.signal(syscall.SIGKILL)
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
	p, err := election.NewPlan(t, 1, 0)
	if err != nil {
		return 0, grace
	}
	slack := max(p.LeadWindow-t.RenewInterval-2*t.OpTimeout, 0)
	early = min(grace, slack)
	return early, grace - early
}

// childEnv is what the child learns of its term.
func childEnv(lease, holder string, token uint64) []string {
	return []string{"TENURE_LEASE=" + lease, "TENURE_TOKEN=" + fmt.Sprint(token), "TENURE_HOLDER=" + holder}
}
