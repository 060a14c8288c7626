//go:build !linux

package servers

import "syscall"

// sysProcAttr puts a server in a process group of its own. Outside Linux
// there is no parent-death signal: a test run killed by SIGKILL leaves its
// servers running (their state directory names them).
func sysProcAttr(_ bool, cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
