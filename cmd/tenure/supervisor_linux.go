package main

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes orphaned descendants the supervisor's children
// instead of init's, so that a process that left the command's group
// (setsid) and lost its parent is still found below the supervisor.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// descendants returns the live processes below pid, from /proc: every
// process whose chain of parents reaches pid. Zombies are left out (they
// are dead; their parents reap them).
func descendants(pid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	children := map[int][]int{}
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 || f[0][0] == 'Z' {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	for next := children[pid]; len(next) > 0; {
		p := next[0]
		next = append(next[1:], children[p]...)
		out = append(out, p)
	}
	return out
}
