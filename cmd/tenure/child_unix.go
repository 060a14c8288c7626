//go:build unix

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// child is the command tenure runs under a lease or a lock, behind its
// supervisor (supervisor.go), which owns the command's whole tree.
type child struct {
	sup  *exec.Cmd // the supervisor
	pid  int       // the command's
	done chan struct{}
	st   int // the command's exit status, once done

	termDeadline

	mu   sync.Mutex // guards ctl and sent
	ctl  *os.File   // the control pipe's write end; tenure's death closes it
	sent time.Time  // the deadline last sent
}

// self is what starts the supervisor: this very binary, even if a newer
// one replaced it on disk.
func self() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// startChild starts argv, with env added to tenure's environment, under a
// supervisor that stops it early before a term's deadline and kills it
// with grace. The command shares tenure's stdin, stdout and stderr.
func startChild(argv, env []string, stdout, stderr io.Writer, early, grace time.Duration) (*child, error) {
	exe, err := self()
	if err != nil {
		return nil, fmt.Errorf("start the supervisor: %w", err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	args := append([]string{os.Args[0], supervisorArg, strconv.FormatInt(int64(early), 10), strconv.FormatInt(int64(grace), 10), "--"}, argv...)
	sup := &exec.Cmd{Path: exe, Args: args, Env: append(os.Environ(), env...), ExtraFiles: []*os.File{ctlR, repW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	sup.Stdin, sup.Stdout, sup.Stderr = os.Stdin, direct(stdout), direct(stderr)
	err = sup.Start()
	ctlR.Close()
	repW.Close()
	if err != nil {
		ctlW.Close()
		repR.Close()
		return nil, fmt.Errorf("start the supervisor: %w", err)
	}
	c := &child{sup: sup, ctl: ctlW, done: make(chan struct{})}
	rep := bufio.NewReader(repR)
	line, _ := rep.ReadString('\n')
	verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	if verb != "pid" {
		ctlW.Close()
		repR.Close()
		_ = sup.Wait()
		if verb == "error" {
			return nil, fmt.Errorf("start %s: %s", argv[0], arg)
		}
		return nil, fmt.Errorf("start %s: the supervisor ended: %q", argv[0], line)
	}
	c.pid, _ = strconv.Atoi(arg)
	go func() {
		c.st = -1
		if line, err := rep.ReadString('\n'); err == nil {
			if s, ok := strings.CutPrefix(strings.TrimSpace(line), "exit "); ok {
				c.st, _ = strconv.Atoi(s)
			}
		}
		repR.Close()
		err := sup.Wait()
		if c.st < 0 { // the supervisor died before it could say
			c.st = 1
			if ee, ok := err.(*exec.ExitError); ok {
				if sig, ok := exitSignal(ee); ok {
					c.st = 128 + sig
				}
			}
		}
		c.mu.Lock()
		c.ctl.Close()
		c.ctl = nil
		c.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

// send writes a line to the supervisor, unless it is gone.
func (c *child) send(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctl != nil {
		fmt.Fprintf(c.ctl, format+"\n", args...)
	}
}

// signal sends sig to the command itself (a reload, a log rotation).
func (c *child) signal(sig os.Signal) { c.send("signal %d", sig.(syscall.Signal)) }

// signalGroup sends sig to the command's process group.
func (c *child) signalGroup(sig os.Signal) { c.send("group %d", sig.(syscall.Signal)) }

// stopTree sends SIGTERM to the whole tree; the supervisor kills it after
// the grace, or at the term's deadline if sooner.
func (c *child) stopTree() { c.send("stop") }

// kill kills the whole tree at once.
func (c *child) kill() { c.send("kill") }

// setDeadline tells the supervisor the term's deadline (zero: none), so
// that it stops the command in time even if tenure cannot.
func (c *child) setDeadline(d time.Time) {
	c.note(d)
	c.mu.Lock()
	same := d.Equal(c.sent)
	c.sent = d
	c.mu.Unlock()
	if same {
		return
	}
	ns := int64(0)
	if !d.IsZero() {
		ns = monoNow() + int64(time.Until(d))
	}
	c.send("deadline %d", ns)
}

// status is the command's exit status as a shell reports it: its code, or
// 128 + the signal that killed it.
func (c *child) status() int {
	<-c.done
	return c.st
}

func exitSignal(ee *exec.ExitError) (int, bool) {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal()), true
	}
	return 0, false
}

func notify(ch chan os.Signal) {
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGTSTP, syscall.SIGCONT)
}

// notifyGroup catches what `tenure run --group` takes: the signals that
// stop tenure, and those it passes on to every child.
func notifyGroup(ch chan os.Signal) {
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
}

// passOn reports whether sig only goes on to the command, which keeps
// running (a reload, a log rotation), rather than stopping it.
func passOn(sig os.Signal) bool {
	return sig == syscall.SIGHUP || sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2
}

// suspend handles job control: SIGTSTP stops the command's group, then
// tenure (as a shell stops a job); SIGCONT resumes the group. It reports
// whether sig was one of those.
func suspend(c *child, sig os.Signal) bool {
	switch sig {
	case syscall.SIGTSTP:
		if c != nil {
			c.signalGroup(syscall.SIGSTOP)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return true
	case syscall.SIGCONT:
		if c != nil {
			c.signalGroup(syscall.SIGCONT)
		}
		return true
	}
	return false
}

// parseSignal parses a signal's name, with or without SIG (USR1, SIGUSR1),
// or its number.
func parseSignal(s string) (os.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && unix.SignalName(syscall.Signal(n)) != "" {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return nil, fmt.Errorf("not a signal: want a name such as USR1 or SIGHUP, or a number")
}
