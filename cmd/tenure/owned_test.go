//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A test's processes: every process a test starts carries a mark in its
// environment, which tenure's supervisors, the commands and whatever they
// start inherit, so that the test can wait for all of them, found by the
// mark and then waited on by PID, before its temporary directories go.
// Without it a supervisor that kills its command asynchronously (after
// tenure's kill -9) races the test's RemoveAll of the directory the command
// still writes to.

const envOwner = "TENURE_TEST_OWNER"

var owners sync.Map // *testing.T → its mark, once per test

// ownProcesses marks the processes t starts from now on and registers the
// wait for them. It creates t's temporary directory first, so that its
// removal is registered before the wait and so runs after it (cleanups run
// last first).
func ownProcesses(t *testing.T) {
	t.Helper()
	mark := fmt.Sprintf("%d/%s", os.Getpid(), t.Name())
	if _, dup := owners.LoadOrStore(t, mark); dup {
		return
	}
	t.TempDir()
	t.Setenv(envOwner, mark)
	t.Cleanup(func() {
		defer owners.Delete(t)
		if left := awaitOwnedGone(envOwner+"="+mark, 30*time.Second); len(left) > 0 {
			t.Errorf("processes this test started were still running 30s after it ended, killed now: %s", strings.Join(left, "; "))
		}
	})
}

// awaitOwnedGone waits until no process other than this one has env in
// its environment, for at most within. It returns the processes left then,
// after killing each by its PID.
func awaitOwnedGone(env string, within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		pids := ownedPIDs(env)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for _, pid := range pids {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
				_ = syscall.Kill(pid, syscall.SIGKILL)
				pidGone(pid, 5*time.Second)
			}
			return left
		}
		for _, pid := range pids {
			pidGone(pid, time.Until(deadline))
		}
	}
}

// ownedPIDs lists the live processes whose environment holds env. A zombie
// has no environment left, and writes nothing either.
func ownedPIDs(env string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(env)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue // gone, or not ours to read
		}
		for v := range bytes.SplitSeq(b, []byte{0}) {
			if bytes.Equal(v, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
