//go:build !unix

package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, sig os.Signal) {
	if sig == os.Interrupt {
		_ = p.Signal(sig)
		return
	}
	_ = p.Kill()
}

func exitSignal(*exec.ExitError) (int, bool) { return 0, false }

func notify(ch chan os.Signal) { signal.Notify(ch, os.Interrupt) }

func lockThread() {}

func passOn(os.Signal) bool { return false }
