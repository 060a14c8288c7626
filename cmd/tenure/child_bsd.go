//go:build unix && !linux

package main

import "syscall"

// sysProcAttr: a group of its own. These systems have no parent-death
// signal: a child of a tenure killed with SIGKILL runs on (see the docs).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
