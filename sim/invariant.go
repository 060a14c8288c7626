package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Invariant is a property the checker verifies at every event.
type Invariant int

const (
	// OneLeader (I1): at most one node acts as leader at any true instant. A
	// node acts from the moment its Candidate decides it was elected to the
	// moment the term's context is cancelled.
	OneLeader Invariant = iota + 1
	// Tokens (I2): each term has one holder, and tokens strictly increase
	// from term to term; the store only ever mints the previous token + 1.
	Tokens
	// Fencing (I3): the resource never accepts a write whose token is lower
	// than one it already accepted.
	Fencing
	// Callbacks (I4): per candidate, OnElected and OnDemoted alternate,
	// OnDemoted comes after OnElected returned and after the term's context
	// was cancelled, and the context is cancelled by the term's local
	// deadline (or, for a paused process, as soon as it runs again).
	Callbacks
	// Liveness (I5): after a leader crashes, another is elected within the
	// failover bound; after the faults heal, one leader emerges and stays.
	Liveness
	// Goroutines (I6): every Candidate's Run returns, and (real tier) no
	// goroutine it started outlives the run.
	Goroutines
	// FairOrder (I7, lock scenarios): a fair waiter is granted a lock only
	// when no waiter that took its ticket earlier is still waiting while
	// live (never paused, cut off or refused by the store since).
	FairOrder
	// Preference (I8, preferred-leader scenarios): a leader hands the lease
	// over (Config.Priority) only once its term is PriorityHoldOff old, and
	// a leader follows within the hand-over bound (world.handingOver); once
	// the candidates have been up and unfaulted for the preference bound,
	// one of the highest priority live leads (world.expectPreferred).
	Preference

	numInvariants = int(Preference)
)

var invariantNames = [...]string{"", "one leader", "tokens", "fencing", "callbacks", "liveness", "goroutines", "fair order", "preference"}

// String returns the short name, "I1" to "I8".
func (i Invariant) String() string { return fmt.Sprintf("I%d", int(i)) }

// Name returns what the invariant is about, e.g. "one leader".
func (i Invariant) Name() string {
	if i < 1 || int(i) > numInvariants {
		return "?"
	}
	return invariantNames[i]
}

// Set is a set of invariants.
type Set uint16

// All holds every invariant.
const All = Set(1<<(numInvariants+1) - 2)

// Of returns the set of the given invariants.
func Of(invs ...Invariant) Set {
	var s Set
	for _, i := range invs {
		s |= 1 << i
	}
	return s
}

// Has reports whether i is in s.
func (s Set) Has(i Invariant) bool { return s&(1<<i) != 0 }

// Without returns s less the given invariants.
func (s Set) Without(invs ...Invariant) Set { return s &^ Of(invs...) }

func (s Set) String() string {
	var b strings.Builder
	for i := Invariant(1); int(i) <= numInvariants; i++ {
		if s.Has(i) {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(i.String())
		}
	}
	return b.String()
}

// Violation is one breach of an invariant, at a true instant of the run.
type Violation struct {
	Inv Invariant
	At  time.Duration // true time since the start of the run
	Msg string
}

func (v Violation) String() string {
	return fmt.Sprintf("%v (%s) at %s: %s", v.Inv, v.Inv.Name(), fmtTime(v.At), v.Msg)
}

// fmtTime formats a true time as seconds with nanoseconds, as traces show it.
func fmtTime(d time.Duration) string {
	return string(appendTime(nil, d))
}

func appendTime(b []byte, d time.Duration) []byte {
	s, ns := int64(d/time.Second), int64(d%time.Second)
	if s < 0 || ns < 0 { // never in a run; fmt says it plainly
		return fmt.Appendf(b, "%4d.%09d", s, ns)
	}
	for w := 1000; w > 1 && s < int64(w); w /= 10 {
		b = append(b, ' ')
	}
	b = strconv.AppendInt(b, s, 10)
	b = append(b, '.')
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + ns%10)
		ns /= 10
	}
	return append(b, digits[:]...)
}
