//go:build !unix

package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"time"
)

// child is the command tenure runs under a lease or a lock. Here (no Unix)
// there is no supervisor: tenure kills the command itself, and what the
// command started is out of its reach.
type child struct {
	termDeadline
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startChild(argv, env []string, stdout, stderr io.Writer, _, _ time.Duration) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, direct(stdout), direct(stderr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) signal(sig os.Signal) {
	if sig == os.Interrupt {
		_ = c.cmd.Process.Signal(sig)
		return
	}
	_ = c.cmd.Process.Kill()
}

func (c *child) signalGroup(sig os.Signal) { c.signal(sig) }
func (c *child) stopTree()                 { _ = c.cmd.Process.Kill() }
func (c *child) kill()                     { _ = c.cmd.Process.Kill() }

func (c *child) setDeadline(d time.Time) { c.note(d) }

func (c *child) status() int {
	<-c.done
	if ee, ok := c.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if c.err != nil {
		return 1
	}
	return 0
}

func notify(ch chan os.Signal)         { signal.Notify(ch, os.Interrupt) }
func notifyGroup(ch chan os.Signal)    { signal.Notify(ch, os.Interrupt) }
func passOn(os.Signal) bool            { return false }
func suspend(*child, os.Signal) bool   { return false }
func supervisorMain(args []string) int { return exitUsage }

const supervisorArg = "_supervise"

// parseSignal: only an interrupt can be sent to a process here.
func parseSignal(s string) (os.Signal, error) {
	if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(s), "SIG"), "INT") {
		return os.Interrupt, nil
	}
	return nil, fmt.Errorf("only INT can be sent to a command on this platform")
}
