//go:build unix

package main

import (
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return sysProcAttr() }

// signalGroup sends sig to the process group p leads.
func signalGroup(p *os.Process, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-p.Pid, s)
		return
	}
	_ = p.Signal(sig)
}

func exitSignal(ee *exec.ExitError) (int, bool) {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return int(ws.Signal()), true
	}
	return 0, false
}

func notify(ch chan os.Signal) {
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
}

// passOn reports whether sig only goes on to the child, which keeps
// running (a reload, a log rotation), rather than stopping it.
func passOn(sig os.Signal) bool {
	return sig == syscall.SIGHUP || sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2
}

func lockThread() { runtime.LockOSThread() }
