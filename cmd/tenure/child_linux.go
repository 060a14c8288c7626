package main

import "syscall"

// sysProcAttr is the command's, as the supervisor starts it: a group of
// its own, and SIGKILL if the supervisor dies (kill -9 included).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
