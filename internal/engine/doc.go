// Package engine is the glue between tenure's API and its entries' logic,
// without goroutines: it runs the locks and semaphores of a Locker
// (internal/lockcore) as entries of a host.Core, routes their store calls
// and answers, keeps the calls of one process for one name in turn, and
// tells the process around it what happened through an effects interface.
//
// tenure's Locker runs it under host.Host's loop, with callers waiting on
// channels, contexts for held locks, metrics and a UDP listener around
// it; the simulator steps the very same code with its own time, network
// and program. What differs between the two is only what the effects do.
package engine
