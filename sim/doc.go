// Package sim is tenure's deterministic simulator. It runs candidates under
// the faults that break leader election in production (clock skew, drift
// and steps, process pauses, partitions, slow and lost store responses,
// writes that land late, crashes and restarts), checks invariants at every
// event, and replays any run exactly from its seed.
//
// # Two tiers
//
// The fast tier (Run) runs the Candidate, the Locker and the Group below
// their APIs, single-threaded: their production glue and entries
// (internal/engine, under the driver tenure.Candidate runs,
// internal/driver) on the production host.Core, whose calls the world
// carries over its network and whose one timer it fires. The glue's queues
// of callbacks (engine.Dispatch, engine.Notify) hand the sim's callbacks
// out as they hand tenure's goroutines theirs; the fast tier runs them on
// its one thread. It simulates hours per second of wall time.
//
// The real tier (RunReal, from a test) runs tenure.Candidate, tenure.Locker
// and tenure.Group themselves, their goroutines and callbacks, inside a
// testing/synctest bubble, with a clock and a store supplied by the
// simulator, and typed hooks (internal/seam, the engine's tap) that report
// what their loops do as they do it. After each event the scheduler calls
// synctest.Wait, which returns once every goroutine is blocked on
// something only the scheduler can provide, then fires the next event. It
// fires one event at a time in (true time, sequence) order: the processes'
// timers are the simulator's, so the runtime's order for timers at equal
// instants never decides anything.
//
// Both tiers leave the same trace for the same seed, line for line: the
// fast tier runs the production entries and host core below the API, the
// real tier the API's goroutines and channels around them too (TestRealTier
// checks every scenario), so the fast tier's millions of events speak for
// the real code.
//
// # Determinism
//
// Every random draw comes from a seeded generator, in event order, using
// integer arithmetic only. Goroutines of the real tier never touch shared
// state directly: they stage what they do (a timer, a store call, a
// callback, a write) and the scheduler processes the items of one event in
// a canonical order, by instance, then by source (the Candidate's loop, its
// store calls, its callback goroutine, its OnLeaderChange goroutine, the
// goroutine that called Run), then
// by order within the source. Within one event each source is a single
// goroutine, so that order does not depend on how the runtime interleaved
// them. Only one instance is woken per event, and only the scheduler
// touches the store and the resource.
//
// # Time
//
// True time is the simulator's; nodes never see it. Each node's clock has
// a monotonic reading (an offset, and a rate error in parts per billion
// that scenarios may change at any time, or stop altogether during a VM
// suspend) and a wall reading (the monotonic one plus an offset that a
// clock step changes). The tenure.Clock a Candidate gets returns the
// monotonic reading from Now, as time.Now's monotonic part does, so tenure,
// which only subtracts readings of its own clock, is immune to wall-clock
// steps, exactly as it is on a real host; Record.WrittenAt carries that
// reading for humans. Only the naive strategy reads the wall clock.
//
// # The store
//
// One linearizable compare-and-swap register, reached over links with
// seeded latency (a uniform body and a long tail in which every doubling of
// the delay is as likely as the previous one). A request takes effect at the
// instant it arrives. Faults: requests refused before they are applied;
// nodes cut off from the store (requests and answers dropped); answers lost
// after the write applied (silently, or as a connection reset); writes held
// on the wire past their writer's OpTimeout, so that they land after the
// writer gave up; brownouts (slow and failing for a while); and conflicts
// reported with or without the current record.
//
// # Processes
//
// A pause freezes an instance: nothing it waits for (timers, answers,
// signals) reaches it until it resumes, and then it processes what is
// overdue, its clock having jumped. Pausing a leader between its check of
// the term and its write makes a zombie that writes with its old token. A
// crash ends an instance at once (no release; requests already on the wire
// still land); a restart starts a new instance on the node with the same ID
// or a new one. In the real tier a crashed Candidate's goroutines wind down
// cut off from the world, so that the run can still check I6.
//
// # The program under test
//
// Each instance runs the same callbacks in both tiers: OnElected loops,
// every Plan.Work, checking its term's context and then, Plan.Act later,
// writing its token to the resource; any callback may be slow (Plan.Slow).
// The resource is a fencing.Guard (Fenced) or accepts everything
// (Unfenced), in which case the checker flags what the guard would refuse.
//
// # Invariants
//
// The checker verifies at every event (see Invariant):
//
//   - I1: at most one instance acts as leader at any true instant; acting
//     lasts from the moment its loop decides it was elected (the driver's
//     Elected effect) to the cancellation of the term's context (Demoted).
//     At the store, a held record (the lease, a lock's) is taken no sooner
//     than its ttl after it was written: a taker that skipped part of its
//     wait (a wake-up or renewal notice trusted) breaks I1 there, even when
//     the holder had crashed and no two believers overlap.
//   - I2: each token begins one term, tokens rise from term to term, and a
//     write keeps holder and token or mints a token above every token the
//     store ever held (the previous + 1 while the record is the newest).
//   - I3: the resource never accepts a write whose token is lower than one it
//     accepted before. With a fenced resource this must hold everywhere,
//     pauses and clocks beyond their bound included.
//   - I4: OnElected and OnDemoted alternate per instance, OnDemoted comes
//     after OnElected returned and after the term's context was cancelled,
//     and the context is cancelled by the first reading of the local clock
//     at or past the term's deadline (for a paused process: when it resumes);
//     no release is sent before the term's callbacks returned; the reason a
//     term ended fits what happened.
//   - I5: after a leader crashes, another one is elected within
//     ttl×(1+ρ)/(1-ρ) + 1.1·poll/(1-ρ) + 4 store round trips (in scenarios
//     whose latency is bounded; docs/sim.md derives the bound; 1.1·poll is
//     the longest wait between polls); after a graceful release, within
//     1.1·poll/(1-ρ) + 4 round trips. Where the leader had sent the standby a
//     renewal notice for its last write over a clean network, the poll drops
//     out: ttl×(1+ρ)/(1-ρ) + 9 one-way delays from the notice's send
//     (world.lastNotice); likewise from the last write's landing where a
//     clean change feed tells a hot follower of it (world.lastFeed). After
//     every fault heals, one leader emerges, keeps its term and is seen by
//     all.
//   - I6: every Run returns, and in the real tier no goroutine outlives the
//     run.
//
// Each scenario declares which invariants it promises (Plan.Requires): I1
// cannot hold for a process that pauses past its lease (that is what
// fencing is for), nor I1 and I2 for a clock that stops or runs beyond ρ.
// The checker reports violations of the others too, so a run shows what
// fencing saved.
//
// # Locks
//
// Lock scenarios (Scenario.Locks) run lock clients instead of Candidates,
// in the same world: a process on each node calls TryLock or Lock (fair or
// not) with a deadline, holds the lock a while and unlocks, with the
// production Locker below its API (internal/engine and internal/lockcore on
// the production host.Core, stepped by the world), over the same store (a record per lock and per fair queue
// beside the lease) and the same faults. The one checker holds them to I1
// as mutual exclusion in belief (a holder believes until its hold ends or
// its clock reaches the deadline), I2 per lock, I5 as a bounded wait (every
// call answered by its deadline plus one OpTimeout), I6 (every process ends
// with its lock over) and I7 (FairOrder). See locks.go.
//
// # Baselines
//
// Options.Strategy Naive runs a lock that stores an expiry in wall-clock
// time and compares it with the reader's own wall clock; it breaks I1 under
// constant skew and clock steps. Options.Resource Unfenced shows the
// zombie's stale write accepted after a pause. They prove the checker sees
// what it claims to.
//
// # Replaying
//
//	go run ./cmd/tenure sim -scenario gc-pause -seed 7 -trace
//
// prints the trace of one run; -svg draws its timeline. See docs/sim.md.
package sim
