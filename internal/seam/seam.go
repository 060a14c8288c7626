// Package seam lets the simulator watch a tenure.Candidate without a public
// hook: the moments its loop begins and ends a term, which the real tier
// holds to the invariants, arrive as typed calls rather than through log
// text. Package tenure fills in Observe when it is initialised.
package seam

// Observer learns, on a Candidate's loop goroutine and at the instant it
// happens, that a term began or ended.
type Observer interface {
	Elected(token uint64)
	Demoted(token uint64, reason string)
}

// Observe installs o on candidate, a *tenure.Candidate, before its Run.
var Observe func(candidate any, o Observer)
