package tenure

import (
	"context"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/internal/driver"
)

// Jeopardy says that a held term's renewals are failing: since Since (by
// the holder's clock), and that the term ends at Deadline unless one lands.
// The holder still holds the lease until then; its program should stop
// taking new work, flush, and be ready to hand over.
type Jeopardy struct {
	Since, Deadline time.Time
}

type jeopardyKey struct{}

// DeadlineOf returns the local deadline of the term that ctx belongs to
// (OnElected's or OnAssigned's context, a Lock's Context, or one derived
// from them) as of its latest confirmed renewal: the term's context is done
// by then unless a renewal moves it. It is not ctx.Deadline, which stays
// unset, so that a call bounded by ctx is not cut at a deadline that a
// renewal would have moved. For a context of no term: zero, false.
func DeadlineOf(ctx context.Context) (time.Time, bool) {
	t, _ := ctx.Value(jeopardyKey{}).(*termContext)
	if t == nil {
		return time.Time{}, false
	}
	return t.current(), true
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
	t, _ := ctx.Value(jeopardyKey{}).(*termContext)
	if t == nil {
		return Jeopardy{}, false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	jp := t.jeopardy(t.clk.Now())
	since := jp.j.Since()
	if jp.changed != nil && since != jp.told {
		close(jp.changed) // a change not yet announced: those who asked before learn of it
		jp.changed = nil
	}
	if jp.changed == nil {
		jp.changed, jp.told = make(chan struct{}), since
	}
	if !since.IsZero() {
		j = Jeopardy{Since: since, Deadline: t.deadline}
	}
	return j, !since.IsZero(), jp.changed
}

// followJeopardy takes a step's snapshot into the term's context, and logs
// and counts a change of its jeopardy; it returns since when the renewals
// have been failing (zero: they have not). The caller then announces it on
// the context (termContext.announce), once its Status says it.
func followJeopardy(tc *termContext, now time.Time, s driver.Snapshot, ms *metrics, log func(slog.Level, string, ...any), args ...any) time.Time {
	changed, since := tc.publish(now, s)
	switch {
	case !changed:
	case !since.IsZero():
		ms.jeopardized(1)
		log(slog.LevelWarn, "in jeopardy: renewals failing, or too little time left for one; the term ends at its deadline unless one lands",
			append(args, "since", since, "deadline", tc.current(), "err", s.Err)...)
	default:
		ms.jeopardized(-1)
		if s.Leading {
			log(slog.LevelInfo, "out of jeopardy: a renewal landed", args...)
		}
	}
	return since
}
