// Package tenure elects one leader among the replicas of a long-running
// daemon. A Candidate campaigns for a named lease kept in a lease.Store
// (lease/dynamolease, lease/s3lease, lease/pglease, lease/etcdlease,
// lease/gcslease, lease/azbloblease, lease/k8slease, lease/redislease,
// lease/natslease; lease/filelease for the processes of one host,
// lease/memlease for one process), tells the program through Callbacks when it
// is elected and demoted, and gives each leadership term a fencing token that
// is higher than every earlier term's.
//
// # Guarantees
//
// Under the assumptions below:
//
//  1. At most one candidate believes it leads at any instant: a term's
//     context is cancelled, at the latest, at a local deadline that falls
//     before any other candidate may take the lease.
//  2. Tokens strictly increase from term to term, and a term keeps its token.
//     They never go back, even across releases, because each is minted inside
//     the write that takes the lease, above the stored token and above every
//     token the candidate has seen.
//  3. OnElected and OnDemoted run one at a time; OnDemoted follows every
//     OnElected exactly once, after OnElected returned and after the term's
//     context was cancelled; a candidate campaigns again only after both
//     returned. The term's context reports the end of the term as soon as
//     the clock passes the deadline, even before the loop has run.
//  4. While store calls are answered within a bound, after a leader crashes
//     another candidate leads within
//     (LeaseDuration×(1+MaxDrift) + 1.1×PollInterval)/(1-MaxDrift) + four
//     store round trips; after it releases (Run's context done), within
//     1.1×PollInterval/(1-MaxDrift) + four round trips. (1.1×PollInterval
//     is the longest wait between polls, which are drawn within ±10% of
//     PollInterval. The round trips: the leader's last write in flight, the
//     read that just missed it, the read that sees it, a read in flight when
//     the wait ends, and the takeover.)
//
// # Preferred leaders
//
// With Config.Priority, a candidate is preferred to those of lower
// priority. Every leader, with the defaults too, reads the standby record
// once a cold poll and hands the lease over (ReasonHandedOver) to a
// standby of higher priority that it has seen alive, once its term is
// PriorityHoldOff old: the term ends, the lease is released and the
// standby woken (a Priority listens for wake-ups by default: see
// Runtime.WakeAddr). Priority decides only who gives the lease up and who is
// woken; every takeover keeps the rules above, so guarantees 1 to 4 hold
// as stated. Equal priorities never hand over.
//
// # Locks and watching
//
// A Locker takes locks on leases for pieces of work (TryLock, Lock, Do) and
// gives them back (Lock.Unlock), under the same rules: a held lock's context
// ends at its local deadline, a silent holder is waited out for its lease
// stretched by MaxDrift, tokens only rise. One goroutine renews every lock of
// a Locker. With Runtime.WakeAddr an Unlock wakes a waiter over UDP;
// a wake-up, like a standby's, only makes its receiver read sooner, never
// take sooner. With Slots(n) a name is a semaphore: each slot a lock of
// its own with its own tokens, at most n holders in belief, n fixed for
// every caller by the first. Watch follows a lease's holder without
// writing.
//
// # Lost records
//
// A lease record can vanish or go back in time (an operator's delete, a TTL
// attribute or lifecycle rule, a restored backup). A candidate that has seen
// the record treats that like a holder gone silent: it creates or takes the
// lease only after every read for LeaseDuration×(1+MaxDrift) (the longest
// lease it has seen) found it so, and a leader whose renewal finds it so
// steps down at once (ReasonRecordLost); guarantees 1 and 2 hold for such
// candidates. A candidate that never saw the record cannot tell it from a
// new lease and creates it at once: guarantee 1 may then fail until the old
// leader's next renewal. Tokens still rise, because a created record's token
// is at least the creator's wall time in Unix milliseconds, as long as its
// clock is not behind the first creator's by more than the record's age.
// Every such sighting is logged at error level. Keep lease records safe: no
// TTL or lifecycle rule on them, no restores from backups.
//
// # Assumptions
//
//  1. Bounded drift: every participant's clock measures elapsed time at a
//     rate within MaxDrift of true time. Clocks need not agree on the time of
//     day: wall clocks are never compared, and a wall-clock step changes
//     nothing.
//  2. A linearizable store: a read sees every write that completed before it
//     began, and a compare-and-swap succeeds for one writer only.
//  3. The process acts only while its term's context is alive. Nothing can
//     stop a process that pauses (GC, VM suspend, a stalled disk) between
//     checking its context and acting; a pause can outlast any lease. Guarantee
//     1 therefore protects what candidates believe, not what a resource sees:
//     a resource that must never see two writers has to check fencing tokens.
//
// # Caller's duties
//
//  1. Give every process its own ID (the default is unique per process). A
//     candidate that sees another process write with its ID reports it (an
//     error log and Status().Err).
//  2. Do the leader's work only under the context OnElected receives, and
//     stop when it is done; return from OnElected then (or at once, if the
//     work runs elsewhere under that context).
//  3. Send the term's token with every write to a resource that must never
//     see a stale leader, and have the resource refuse tokens lower than the
//     highest it has seen (package fencing).
//  4. Keep callbacks short apart from OnElected's work, and make OnElected
//     return when its context is done: the candidate campaigns again only
//     after it has, and Run waits for every callback before returning.
//  5. Cancel Run's context to leave: the lease is released so that another
//     candidate takes over within a poll interval rather than a lease.
//  6. Choose MaxDrift above the worst rate error of any participant's clock,
//     and LeaseDuration long enough for several renewals, each of which may
//     take OpTimeout.
package tenure
