// Package engine is the glue between tenure's API and its entries' logic,
// without goroutines: a Candidate's run (Run: the lease's driver and
// release timer, the standby campaign or a leader's watch of the standby
// record, resigns, hand-overs, the wake-up planned for the standby) and
// the locks and semaphores of a Locker (Locker: one entry per call, the
// calls of one process for a name kept in turn), as entries of a
// host.Core. It routes their store calls and answers, and tells the
// process around it what happened through an effects interface.
//
// A Candidate's glue around its run is here too (Candidate): the terms'
// contexts and their jeopardy (TermContext), the queues of its callbacks
// (Dispatch) and of OnLeaderChange (Notify), its status, and the standby's
// wake-up (WakePlan). internal/shell runs all of it in a process, under
// host.Host's loop, with the callbacks on goroutines, callers waiting on
// channels, metrics and a UDP listener around it; the simulator steps the
// very same code on one thread, with its own time, network and program.
// What differs between the two is only what the shells do.
package engine
