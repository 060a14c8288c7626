//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is the process between tenure and the command it runs: the
// tenure binary started again with supervisorArg. It exists so that nothing
// the command starts outlives the lease, whatever happens to tenure:
//
//   - tenure holds the write end of a pipe (the control pipe, the
//     supervisor's fd 3); when tenure dies, kill -9 included, the supervisor
//     reads EOF and kills the command's whole tree at once;
//   - it is a child subreaper (Linux), so descendants that left the
//     command's process group (setsid, double forks) stay below it, and the
//     tree it kills is every process the command started, found in /proc;
//   - it enforces the term's deadline itself, from the deadlines tenure
//     sends after each renewal: a tenure that is stopped (SIGSTOP, a
//     debugger) or starved cannot leave the command running past its term;
//   - when the command exits, what it left running is stopped too
//     (SIGTERM, SIGKILL after the grace), like systemd's
//     KillMode=control-group, before tenure releases the lease.
//
// It runs in a process group of its own, so that signals meant for
// tenure's group (a terminal's Ctrl-C) do not reach it, and ignores the
// signals tenure passes on: tenure tells it what to send, and to whom.
// The command runs in a group of its own too, and gets SIGKILL if the
// supervisor dies (Linux).
//
// The control pipe carries lines from tenure:
//
//	deadline NS   the term ends at NS on CLOCK_MONOTONIC (0: no deadline)
//	signal N      send signal N to the command itself
//	group N       send signal N to the command's process group
//	stop          SIGTERM to the whole tree, SIGKILL after the grace
//	kill          SIGKILL to the whole tree now
//
// and its report pipe (fd 4) carries "pid N" once the command started (or
// "error TEXT" if it could not), then "exit STATUS" once the command and
// everything it started are gone.
const supervisorArg = "_supervise"

// monoNow reads CLOCK_MONOTONIC, which tenure and the supervisor share.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// supervisorMain runs the supervisor: args are EARLY GRACE -- COMMAND...,
// the durations in nanoseconds. It returns the supervisor's exit status.
func supervisorMain(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "tenure: the supervisor is started by tenure run and tenure lock, not by hand")
		return exitUsage
	}
	early, err1 := strconv.ParseInt(args[0], 10, 64)
	grace, err2 := strconv.ParseInt(args[1], 10, 64)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "tenure: supervisor: bad durations")
		return exitUsage
	}
	argv := args[3:]
	ctl, rep := os.NewFile(3, "control"), os.NewFile(4, "report")
	if ctl == nil || rep == nil {
		fmt.Fprintln(os.Stderr, "tenure: supervisor: no control pipe")
		return exitUsage
	}
	syscall.CloseOnExec(3) // the command must not hold tenure's pipes
	syscall.CloseOnExec(4)
	// The command's parent-death signal follows the thread that forked it:
	// the main goroutine keeps its thread for the supervisor's life.
	runtime.LockOSThread()
	becomeSubreaper()
	shedStartupPages() // it runs a small loop for as long as the command runs
	caught := make(chan os.Signal, 32)
	signal.Notify(caught, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)

	path, err := exec.LookPath(argv[0])
	var proc *os.Process
	if err == nil {
		proc, err = os.StartProcess(path, argv, &os.ProcAttr{
			Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Sys: sysProcAttr(),
		})
	}
	if err != nil {
		fmt.Fprintf(rep, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 0
	}
	s := &supervisor{pid: proc.Pid, self: os.Getpid(), grace: time.Duration(grace), early: time.Duration(early), status: -1}
	fmt.Fprintf(rep, "pid %d\n", s.pid)

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for !s.finished() {
		select {
		case sig := <-caught:
			if sig == syscall.SIGCHLD {
				s.reap()
			}
			// Other signals are tenure's to pass on: it tells us.
		case line, ok := <-lines:
			if !ok { // tenure is gone: so is everything it started
				lines = nil
				s.killTree()
				continue
			}
			s.command(line)
		case <-s.termC:
			s.terminate()
		case <-s.killC:
			s.killC = nil
			s.killTree()
		case <-s.tick:
			s.reap()
		}
	}
	fmt.Fprintf(rep, "exit %d\n", s.status)
	return 0
}

// supervisor is the state of the supervisor's loop.
type supervisor struct {
	pid, self    int // the command's pid (and process group), the supervisor's
	early, grace time.Duration
	status       int // the command's exit status, -1 while it runs

	termT, killT *time.Timer      // the deadline's SIGTERM; SIGKILL at the deadline or a grace's end
	termC, killC <-chan time.Time // their channels while armed
	killAt       time.Time
	tick         <-chan time.Time // while processes that are not our children die
	stopping     bool             // SIGTERM sent; SIGKILL follows at killC
	abandoned    bool             // processes survived SIGKILL for long: give up on them
}

// finished: the command has exited and nothing it started is left.
func (s *supervisor) finished() bool { return s.status >= 0 && (s.abandoned || !s.anyLeft()) }

// command carries out one line from tenure.
func (s *supervisor) command(line string) {
	verb, arg, _ := strings.Cut(line, " ")
	n, _ := strconv.ParseInt(arg, 10, 64)
	switch verb {
	case "deadline":
		s.setDeadline(n)
	case "signal":
		if s.status < 0 {
			_ = syscall.Kill(s.pid, syscall.Signal(n))
		}
	case "group":
		_ = syscall.Kill(-s.pid, syscall.Signal(n))
	case "stop":
		s.terminate()
	case "kill":
		s.killTree()
	}
}

// setDeadline arms the stop at the term's deadline: SIGTERM early before
// it, SIGKILL at it. Instants already past fire at once.
func (s *supervisor) setDeadline(ns int64) {
	if s.stopping {
		return // the tree is on its way out already
	}
	s.disarm()
	if ns == 0 {
		return
	}
	left := time.Duration(ns - monoNow())
	s.termT = time.NewTimer(max(left-s.early, 0))
	s.termC = s.termT.C
	s.armKill(time.Now().Add(left))
}

func (s *supervisor) disarm() {
	for _, t := range []*time.Timer{s.termT, s.killT} {
		if t != nil {
			t.Stop()
		}
	}
	s.termT, s.killT, s.termC, s.killC, s.killAt = nil, nil, nil, nil, time.Time{}
}

// armKill arms SIGKILL of the tree at, unless it is armed sooner.
func (s *supervisor) armKill(at time.Time) {
	if s.killC != nil && !at.Before(s.killAt) {
		return
	}
	if s.killT != nil {
		s.killT.Stop()
	}
	s.killAt = at
	s.killT = time.NewTimer(max(time.Until(at), 0))
	s.killC = s.killT.C
}

// terminate sends SIGTERM (and SIGCONT, for a stopped process) to the
// whole tree and arms SIGKILL after the grace, or at the deadline if that
// comes sooner.
func (s *supervisor) terminate() {
	if s.stopping {
		return
	}
	s.stopping = true
	s.signalTree(syscall.SIGTERM)
	s.signalTree(syscall.SIGCONT)
	if s.termT != nil {
		s.termT.Stop()
	}
	s.termC = nil
	s.armKill(time.Now().Add(s.grace))
	if s.tick == nil {
		s.tick = time.NewTicker(20 * time.Millisecond).C
	}
}

// signalTree sends sig to the command's group and to every descendant.
func (s *supervisor) signalTree(sig syscall.Signal) {
	_ = syscall.Kill(-s.pid, sig)
	for _, p := range descendants(s.self) {
		_ = syscall.Kill(p, sig)
	}
}

// killTree kills every process the command started, until none is left:
// what forks while it works is found on the next round.
func (s *supervisor) killTree() {
	s.stopping = true
	for i := 0; ; i++ {
		s.signalTree(syscall.SIGKILL)
		s.reap()
		if !s.anyLeft() {
			return
		}
		if i == 1000 { // ten seconds: a process stuck in the kernel, or not ours to kill
			fmt.Fprintf(os.Stderr, "tenure: supervisor: processes of the command survive SIGKILL: %v\n", descendants(s.self))
			s.abandoned = true
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reap collects every exited child, the command's status among them, and
// once the command has exited stops what it left behind.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			break
		}
		if pid == s.pid {
			s.status = ws.ExitStatus()
			if ws.Signaled() {
				s.status = 128 + int(ws.Signal())
			}
		}
	}
	if s.status >= 0 && !s.stopping && s.anyLeft() {
		s.terminate() // the command is gone; what it started goes too
	}
}

// anyLeft reports whether a process of the command's tree is left: in its
// group, or (Linux) below the supervisor.
func (s *supervisor) anyLeft() bool {
	if err := syscall.Kill(-s.pid, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
		return true
	}
	return len(descendants(s.self)) > 0
}
