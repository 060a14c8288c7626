//go:build unix && !linux

package main

import "syscall"

// sysProcAttr is the command's, as the supervisor starts it: a group of
// its own. These systems have no parent-death signal: if the supervisor
// itself is killed, the command runs on (see docs/cli.md).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
