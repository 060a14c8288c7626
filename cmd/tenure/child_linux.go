package main

import "syscall"

// sysProcAttr: a group of its own, and SIGKILL if tenure dies (kill -9
// included), so that no child outlives the tenure that guards it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
