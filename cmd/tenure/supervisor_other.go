//go:build unix && !linux

package main

// becomeSubreaper does nothing here: these systems offer no subreaper to
// an unprivileged process, so a descendant that left the command's process
// group is out of the supervisor's reach (see docs/cli.md).
func becomeSubreaper() {}

// descendants finds nothing here: the process group is the tree.
func descendants(int) []int { return nil }
