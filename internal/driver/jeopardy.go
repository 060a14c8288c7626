package driver

import "time"

// Jeopardy follows a held term's renewals for its holder's program. The
// term is in jeopardy from the first renewal that fails (an error or a
// timeout: the Machine's Err while it leads) after the last one confirmed,
// until a renewal is confirmed again (the deadline moves on) or the term
// ends. A term that ends for want of renewals, the store failing, was in
// jeopardy first, from the failure of a renewal sent a RenewInterval after
// the last confirmed one and answered within OpTimeout: well before its
// deadline. A term confirmed with less than an OpTimeout left (Snapshot.
// Short: elected by a read-back after a lost answer, in a slow store) is
// in jeopardy from then: its first renewal may be answered too late, and
// nothing else would say so before the deadline. The zero value is ready.
type Jeopardy struct {
	since    time.Time // zero: not in jeopardy
	deadline time.Time // the term's deadline as last published
}

// Update takes the snapshot a step published at now, and reports whether
// the jeopardy began or ended with it.
func (j *Jeopardy) Update(now time.Time, s Snapshot) bool {
	was := !j.since.IsZero()
	switch {
	case !s.Leading:
		*j = Jeopardy{}
	case s.Term.Deadline.After(j.deadline):
		// A term begun, or a renewal confirmed: safe, unless too late to
		// count on the next.
		j.since, j.deadline = time.Time{}, s.Term.Deadline
		if s.Short {
			j.since = now
		}
	case (s.Err != nil || s.Short) && j.since.IsZero():
		j.since = now
	}
	return was != !j.since.IsZero()
}

// Since returns when the renewals began failing; zero if the term is not
// in jeopardy.
func (j *Jeopardy) Since() time.Time { return j.since }

// Deadline returns the term's deadline, as of the last confirmed renewal.
func (j *Jeopardy) Deadline() time.Time { return j.deadline }
