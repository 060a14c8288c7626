package tenure

import "time"

// Clock is the part of a clock a Candidate uses. A
// github.com/benbjohnson/clock Clock satisfies it unchanged (clock.New(),
// clock.NewMock()), and so does any clock a simulator supplies. It must be
// safe for concurrent use: the term's context reads Now from the goroutines
// that check it.
//
// Differences of Now readings must measure elapsed time: time.Now's monotonic
// reading does, so a wall-clock step does not move a deadline. Now also
// stamps records with a wall time for humans; nothing compares it across
// hosts for timing. The wall reading has one more use: the token of a
// record a candidate creates is at least the wall time in Unix milliseconds
// (see Lost records in the package doc). A clock whose Now has no separate
// wall reading may add a method Wall() time.Time to supply it.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed. The
	// channel must be buffered (or the send must not block), since a Candidate
	// may stop listening to an old one.
	After(d time.Duration) <-chan time.Time
}
