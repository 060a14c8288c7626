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
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
}

func lockThread() { runtime.LockOSThread() }
