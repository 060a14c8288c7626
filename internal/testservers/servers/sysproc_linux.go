package servers

import "syscall"

// sysProcAttr puts a server in a process group of its own (a Ctrl-C meant
// for the tests does not reach it; Stop signals the group) and, unless it
// is to outlive this process, has the kernel kill it when this process dies,
// even by SIGKILL. The thread that starts it must not exit first: main
// locks itself to its thread.
func sysProcAttr(detach bool, cred *syscall.Credential) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if !detach {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}
