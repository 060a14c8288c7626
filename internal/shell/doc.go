// Package shell runs tenure's engine in a process: the goroutines,
// channels, sockets, metrics and probes around the engine's goroutine-free
// glue (internal/engine). The root package's handles (Candidate, Locker,
// Group) are thin: they check their configuration, and hand their work to
// the shells here. The simulator's fast tier is the other shell of the
// same glue, single-threaded; its real tier runs these.
package shell
