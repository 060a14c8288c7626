package driver

import (
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
)

// TestJeopardy: a failed renewal puts the term in jeopardy, once; another
// failure changes nothing; a confirmed renewal (the deadline moves on)
// makes it safe, even if a later error is still the last one; the term's
// end ends it.
func TestJeopardy(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	leading := func(deadline time.Duration, err error) Snapshot {
		return Snapshot{Leading: true, Term: election.Term{Token: 1, Deadline: t0.Add(deadline)}, Err: err}
	}
	failed := errors.New("timeout")
	var j Jeopardy
	var since time.Time
	steps := []struct {
		s      Snapshot
		change bool
		in     bool
	}{
		{leading(9*time.Second, nil), false, false},     // elected
		{leading(9*time.Second, failed), true, true},    // a renewal fails
		{leading(9*time.Second, failed), false, true},   // and another
		{leading(9*time.Second, nil), false, true},      // a read answers: no renewal yet
		{leading(13*time.Second, nil), true, false},     // one is confirmed
		{leading(13*time.Second, failed), true, true},   // fails again
		{Snapshot{Err: failed}, true, false},            // the term ends
		{leading(20*time.Second, failed), false, false}, // a new term, its first snapshot
	}
	for i, st := range steps {
		now := t0.Add(time.Duration(i) * time.Second)
		if got := j.Update(now, st.s); got != st.change || !j.Since().IsZero() != st.in {
			t.Fatalf("step %d: changed %v, in jeopardy %v; want %v, %v", i, got, !j.Since().IsZero(), st.change, st.in)
		}
		if st.change && st.in && !j.Since().Equal(now) {
			t.Fatalf("step %d: since %v, want %v", i, j.Since(), now)
		}
		if !st.change && st.in && !j.Since().Equal(since) { // it began at the first failure, and stays there
			t.Fatalf("step %d: since %v, want %v", i, j.Since(), since)
		}
		since = j.Since()
	}
}

// A term confirmed with less than an OpTimeout left (Short) is in
// jeopardy from its start; a renewal confirmed in time makes it safe.
func TestJeopardyOfATermConfirmedLate(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	var j Jeopardy
	if !j.Update(t0, Snapshot{Leading: true, Term: election.Term{Token: 1, Deadline: t0.Add(time.Second)}, Short: true}) || !j.Since().Equal(t0) {
		t.Fatalf("a term born short: since %v, want %v", j.Since(), t0)
	}
	if !j.Update(t0.Add(time.Second/2), Snapshot{Leading: true, Term: election.Term{Token: 1, Deadline: t0.Add(9 * time.Second)}}) || !j.Since().IsZero() {
		t.Fatalf("a renewal confirmed in time: since %v, want safe", j.Since())
	}
}
