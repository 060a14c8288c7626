// Command tenure is the command-line tool of the tenure leader-election
// library.
//
// Usage:
//
//	tenure run [flags] NAME -- COMMAND...    run COMMAND while leading NAME
//	tenure lock [flags] NAME -- COMMAND...   run COMMAND once under the lock NAME
//	tenure status [flags] NAME               who holds NAME (--watch: follow it)
//	tenure forward [flags] NAME              send every replica's requests to the leader's service
//	tenure list [flags] [PREFIX]             every lease and lock in the store
//	tenure release --force [flags] NAME      break a stuck lease or lock
//	tenure gc [flags] [PREFIX]               remove records no longer needed
//	tenure version                           this build's version
//	tenure plan [flags]    what a configuration means: failover, requests, cost
//	tenure sim [flags]     run the deterministic simulator (tenure sim -h)
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

func main() {
	// No heap profile is ever taken of the command: sampling one would
	// walk a stack every 512 KB allocated, in a process that runs beside
	// every job for as long as it runs.
	runtime.MemProfileRate = 0
	// Its heap is a few MB, allocated slowly (a renewal every few
	// seconds): collecting at 25 % growth rather than 100 % keeps a
	// megabyte or so off every replica for a GC cycle every few minutes.
	// GOGC, when set, still decides; the simulator, which allocates fast
	// for minutes, keeps the default.
	if os.Getenv("GOGC") == "" && (len(os.Args) < 2 || os.Args[1] != "sim") {
		debug.SetGCPercent(25)
	}
	if len(os.Args) > 1 && os.Args[1] == supervisorArg {
		os.Exit(supervisorMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: tenure <command> [flags]

commands:
  run      run a command while this process leads a lease
  lock     run a command once under a lock (--once-per: once per slot)
  status   show who holds a lease or a lock, or follow it with --watch
  forward  put a service that runs on every replica behind the leader (http, tcp)
  list     list the leases and locks in a store
  release  break a stuck lease or lock (--force): a fenced takeover
  gc       remove records no longer needed
  plan     what a configuration means: lead window, failover, requests, cost
  sim      run the deterministic simulator over named fault scenarios
  version  the version and revision of this build

Run "tenure <command> -h" for a command's flags and examples.
`

// Exit statuses. A child's own status passes through (run, lock), so a
// child that exits with one of these itself reads the same: tenure says
// which on stderr.
const (
	exitUsage       = 2   // bad flags, arguments or configuration
	exitUnavailable = 69  // the store refused us for good, or never answered
	exitLocked      = 75  // lock: held by another until the wait ran out
	exitLost        = 76  // the lease or lock was lost while the child ran
	exitSlotTaken   = 79  // lock --once-per: another replica took this slot
	exitNoCommand   = 127 // the command cannot be found or started
)

// run executes the command line args and returns the exit status: 0 for
// success, 1 when a simulation found a violation, 2 for a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// The log, a child's output and the command's own share the writers.
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	switch args[0] {
	case "sim":
		return simCommand(args[1:], stdout, stderr)
	case "plan":
		return planCommand(args[1:], stdout, stderr)
	case "run":
		return runCommand(args[1:], stdout, stderr)
	case "lock":
		return lockCommand(args[1:], stdout, stderr)
	case "status":
		return statusCommand(args[1:], stdout, stderr)
	case "forward":
		return forwardCommand(args[1:], stdout, stderr)
	case "list":
		return listCommand(args[1:], stdout, stderr)
	case "release":
		return releaseCommand(args[1:], stdout, stderr)
	case "gc":
		return gcCommand(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return versionCommand(stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "tenure: unknown command %q\n%s", args[0], usage)
	return 2
}

// lockedWriter serializes writes: a child's output is copied on a
// goroutine of its own unless the writer is a file.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
