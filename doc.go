// Package tenure elects one leader among the replicas of a long-running
// daemon. A Candidate campaigns for a named lease kept in a lease.Store
// (DynamoDB, S3, or in process), tells the program through Callbacks when it
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
//     They never go back, even across releases, because the store mints each
//     one inside the write that takes the lease.
//  3. Callbacks run one at a time; OnDemoted follows every OnElected exactly
//     once, after OnElected returned and after the term's context was
//     cancelled.
//  4. While store calls are answered within a bound, after a leader crashes
//     another candidate leads within
//     (LeaseDuration×(1+MaxDrift) + PollInterval)/(1-MaxDrift) + four store
//     round trips; after it releases (Run's context done), within
//     PollInterval/(1-MaxDrift) + four round trips. (The round trips: the
//     leader's last write in flight, the read that just missed it, the read
//     that sees it, a read in flight when the wait ends, and the takeover.)
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
//  1. Give every process its own ID (the default is unique per process).
//  2. Do the leader's work only under the context OnElected receives, and
//     stop when it is done; return from OnElected then (or at once, if the
//     work runs elsewhere under that context).
//  3. Send the term's token with every write to a resource that must never
//     see a stale leader, and have the resource refuse tokens lower than the
//     highest it has seen (package fencing).
//  4. Keep callbacks short apart from OnElected's work: they run one at a
//     time, and Run waits for them before returning.
//  5. Cancel Run's context to leave: the lease is released so that another
//     candidate takes over within a poll interval rather than a lease.
//  6. Choose MaxDrift above the worst rate error of any participant's clock,
//     and LeaseDuration long enough for several renewals, each of which may
//     take OpTimeout.
package tenure
