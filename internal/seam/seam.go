// Package seam lets the simulator watch and carry what package tenure does
// without a public hook: the moments a Candidate's loop begins and ends a
// term, which the real tier holds to the invariants, arrive as typed calls
// rather than through log text (Observe, filled in by package tenure when
// it is initialised); and the wake-ups of a Candidate, a Locker or a Group
// travel on the simulated network rather than over UDP (WakeCarrier).
package seam

import (
	"context"

	"github.com/tenure-go/tenure/election"
)

// Observer learns, on a Candidate's loop goroutine and at the instant it
// happens, that a term began or ended: the Machine's term (its deadline
// that of the last confirmed renewal).
type Observer interface {
	Elected(t election.Term)
	Demoted(t election.Term, r election.Reason)
	// Woken: a wake-up was taken (within the rate limit): the lease is
	// read now.
	Woken()
	// HandOver: the leader is about to hand the lease over to a standby
	// of a higher priority.
	HandOver()
}

// WakeRead marks ctx as that of a leader's read of its standby's record,
// made on a goroutine of its own to wake the standby: the simulator orders
// its calls apart from the standby campaign's on the same record.
func WakeRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, wakeReadKey{}, true)
}

// IsWakeRead reports whether ctx is marked by WakeRead.
func IsWakeRead(ctx context.Context) bool { return ctx.Value(wakeReadKey{}) != nil }

type wakeReadKey struct{}

// CallOrder marks ctx with n, the order of its call among its host's:
// calls made at one instant run on goroutines of their own, and the
// simulator orders them as they were made, not as the goroutines ran.
func CallOrder(ctx context.Context, n uint64) context.Context {
	return context.WithValue(ctx, callOrderKey{}, n)
}

// CallOrderOf returns the order CallOrder marked ctx with.
func CallOrderOf(ctx context.Context) (uint64, bool) {
	n, ok := ctx.Value(callOrderKey{}).(uint64)
	return n, ok
}

type callOrderKey struct{}

// Ordered is a lease.Store whose calls a host marks with CallOrder: the
// simulator's. Only this module can name the type.
type Ordered interface{ OrderCalls() CallOrders }

// CallOrders is the token of Ordered.
type CallOrders struct{}

// TermCancelled is the key under which a term's context gives, as a
// func() bool, whether it was cancelled, without checking its deadline as
// its Err and Done do (and cancelling it if it passed): the simulator
// reads it between events, and must not wake a paused process's callback.
type TermCancelled struct{}

// Observing is a lease.Store that observes the terms of the Candidates
// built on it (nil: not those of this lease): the simulator's, in a user's
// world (package simtest), where the user's own code builds the Candidate.
// Only this module can name the type, so no other store is one.
type Observing interface{ ObserveTerms(lease string) Observer }

// Observe installs o on candidate, a *tenure.Candidate, before its Run.
var Observe func(candidate any, o Observer)
