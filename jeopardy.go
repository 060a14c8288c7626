package tenure

import (
	"context"
	"time"

	"github.com/tenure-go/tenure/internal/engine"
)

// Jeopardy says that a held term's renewals are failing: since Since (by
// the holder's clock), and that the term ends at Deadline unless one lands.
// The holder still holds the lease until then; its program should stop
// taking new work, flush, and be ready to hand over.
type Jeopardy struct {
	Since, Deadline time.Time
}

// DeadlineOf returns the local deadline of the term that ctx belongs to
// (OnElected's or OnAssigned's context, a Lock's Context, or one derived
// from them) as of its latest confirmed renewal: the term's context is done
// by then unless a renewal moves it. It is not ctx.Deadline, which stays
// unset, so that a call bounded by ctx is not cut at a deadline that a
// renewal would have moved. For a context of no term: zero, false.
func DeadlineOf(ctx context.Context) (time.Time, bool) {
	t := engine.TermOf(ctx)
	if t == nil {
		return time.Time{}, false
	}
	return t.Current(), true
}

// JeopardyOf reports whether the term that ctx belongs to (OnElected's
// context, a Lock's Context, or a context derived from either) is in
// jeopardy: its renewals have been failing since j.Since, and it ends at
// j.Deadline unless one lands. changed is closed at the next change, into
// jeopardy or out of it (a renewal confirmed); the term's end shows on
// ctx.Done(). For a context of no term: the zero Jeopardy, false, and a nil
// channel.
//
//	for {
//		j, in, changed := tenure.JeopardyOf(ctx)
//		intake.Pause(in) // stop taking new work while in jeopardy
//		select {
//		case <-changed:
//		case <-ctx.Done():
//			return
//		}
//	}
func JeopardyOf(ctx context.Context) (j Jeopardy, in bool, changed <-chan struct{}) {
	t := engine.TermOf(ctx)
	if t == nil {
		return Jeopardy{}, false, nil
	}
	since, deadline, changed := t.JeopardyOf()
	if !since.IsZero() {
		j = Jeopardy{Since: since, Deadline: deadline}
	}
	return j, !since.IsZero(), changed
}
