package tenure

import (
	"context"
	"fmt"

	"github.com/tenure-go/tenure/election"
)

// Callbacks tell a program about its leadership. Every field is optional.
//
// The contract:
//
//   - OnElected and OnDemoted run one at a time, in the order of the
//     events, on one goroutine that Run owns: never concurrently, and never
//     on the goroutine that renews the lease, so a slow callback delays later
//     callbacks but never a renewal.
//   - After a term ends, the candidate does not campaign again until that
//     term's OnElected and OnDemoted have returned: a new term never
//     overlaps an old one's callbacks. An OnElected that ignores its context
//     therefore keeps this candidate out of the running (another one takes
//     over); it is logged as a warning Margin after the term ended and once
//     every LeaseDuration after that, with how long it has been running.
//   - OnElected gets a context that is cancelled no later than the term's
//     local deadline, when the lease is lost, and when Run's context is done.
//     It may block, running the leader's work until the context is done, or
//     return at once. The context carries the term's fencing.Fence
//     (fencing.FromContext) and the values of Run's context. Its Err and
//     Done check the clock themselves: once the deadline has passed they
//     report the term over at once, even if the process was paused and the
//     goroutine that cancels it has not run yet; fencing.Err gives the same
//     answer for contexts derived from it. A check and the action after it
//     are still two steps (a pause can fall between them): a resource that
//     must never see two writers checks the term's fencing token.
//   - OnDemoted is called exactly once for every OnElected, after the term's
//     context was cancelled and after OnElected returned; never otherwise.
//   - OnLeaderChange reports the leader as observed in the store whenever it
//     changes (holder or token), this candidate included; the zero Leader
//     means none (absent or released). An observed leader may already be
//     dead: followers only learn that by waiting out its lease. It runs on a
//     goroutine of its own, one call at a time, so that a slow one (it dials
//     the new leader) never delays OnElected; it may run while OnElected or
//     OnDemoted runs. Changes that arrive while it runs coalesce: it is then
//     called once more, with the latest leader.
//   - A callback that panics ends the term (ReasonShutDown) and stops the
//     candidate as if Run's context were done: no further callback runs, the
//     lease is released within ReleaseTimeout, and Run then panics with a
//     *CallbackPanic carrying the value and the callback's stack.
//   - Run returns only after every callback has returned, so a callback that
//     never returns keeps Run from returning.
type Callbacks struct {
	OnElected      func(ctx context.Context, term Term)
	OnDemoted      func(term Term, reason DemotionReason)
	OnLeaderChange func(leader Leader)
}

// Term describes one leadership term: the election's (see election.Term).
type Term = election.Term

// Leader is a leader as observed in the store (see election.Leader).
type Leader = election.Leader

// DemotionReason says why a term ended (see election.Reason).
type DemotionReason = election.Reason

// The reasons a term ends, as election defines them.
const (
	ReasonLost             = election.ReasonLost
	ReasonExpired          = election.ReasonExpired
	ReasonStoreUnavailable = election.ReasonStoreUnavailable
	ReasonShutDown         = election.ReasonShutDown
	ReasonRecordLost       = election.ReasonRecordLost
	ReasonInvalidRecord    = election.ReasonInvalidRecord
	ReasonResigned         = election.ReasonResigned
	ReasonHandedOver       = election.ReasonHandedOver
)

// CallbackPanic is what Run panics with after a callback panicked: the
// term ended, the lease was given back (within ReleaseTimeout), and then the
// panic goes on from Run with the callback's value and its stack.
type CallbackPanic struct {
	Callback string // "OnElected", "OnDemoted" or "OnLeaderChange"
	Value    any    // what the callback panicked with
	Stack    []byte // the callback goroutine's stack at the panic
}

func (p *CallbackPanic) Error() string {
	return fmt.Sprintf("tenure: %s panicked: %v\n\n%s", p.Callback, p.Value, p.Stack)
}

// Unwrap returns the panic value if it is an error.
func (p *CallbackPanic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}
