package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/fencekey"
	"github.com/tenure-go/tenure/internal/seam"
)

// Clock is the part of a clock a term's context reads: tenure.Clock.
type Clock interface {
	Now() time.Time
}

// TermContext is the context of one term (a Candidate's, a held lock's,
// a group's shard). Besides the cancellation the loop sends, its Done and
// Err check the clock against the term's deadline, so that a process
// resumed from a pause sees its term over at once, before the loop
// goroutine has run; fencing.Err sees the same through contexts derived
// from it. It starts no goroutine.
type TermContext struct {
	context.Context
	cancel context.CancelCauseFunc
	clk    Clock
	fence  fencing.Fence

	mu       sync.Mutex // guards what follows
	deadline time.Time
	jp       *termJeopardy // nil until a renewal fails or JeopardyOf asks: held locks are many
}

// termJeopardy is a term's jeopardy, and those waiting on its change.
type termJeopardy struct {
	j       driver.Jeopardy
	changed chan struct{} // closed at j's next change (JeopardyOf); nil until asked for
	told    time.Time     // j's Since when changed was made
	ever    bool          // the term was in jeopardy at some point
}

// jeopardyKey is the Value key under which a TermContext gives itself.
type jeopardyKey struct{}

// NewTermContext returns the context of term, below parent.
func NewTermContext(parent context.Context, term election.Term, clk Clock) *TermContext {
	t := new(TermContext)
	t.Init(parent, term, clk)
	return t
}

// Init makes t the context of term, as NewTermContext does, in place: a
// lock holds its term's context in itself.
func (t *TermContext) Init(parent context.Context, term election.Term, clk Clock) {
	*t = TermContext{clk: clk, deadline: term.Deadline, fence: term.Fence()}
	t.Context, t.cancel = context.WithCancelCause(parent)
}

// Cancel ends the term's context with cause.
func (t *TermContext) Cancel(cause error) { t.cancel(cause) }

// Fence returns the term's fence.
func (t *TermContext) Fence() fencing.Fence { return t.fence }

// Value answers fencing's keys itself (fencing.NewContext and WithTerm,
// without a context each): the term's fence, and its end as the clock says;
// and JeopardyOf's, the term itself.
func (t *TermContext) Value(key any) any {
	switch key.(type) {
	case fencekey.Fence:
		return t.fence
	case fencekey.Term:
		return t.ended
	case jeopardyKey:
		return t
	case seam.TermCancelled:
		return func() bool { return t.Context.Err() != nil }
	}
	return t.Context.Value(key)
}

// jeopardy returns the term's jeopardy, made on first use from the
// deadline of the last confirmed renewal; t.mu is held.
func (t *TermContext) jeopardy(now time.Time) *termJeopardy {
	if t.jp == nil {
		t.jp = new(termJeopardy)
		t.jp.j.Update(now, driver.Snapshot{Leading: true, Term: election.Term{Deadline: t.deadline}})
	}
	return t.jp
}

// Publish takes what a step of the term's Machine published at now: the
// deadline moves with a confirmed renewal, and the term goes into jeopardy
// or out of it. It returns whether the jeopardy changed, and since when
// the renewals have been failing (zero: they have not). Those waiting on
// JeopardyOf learn of a change at Announce, once the Status says it too.
func (t *TermContext) Publish(now time.Time, s driver.Snapshot) (changed bool, since time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.jp == nil && (!s.Leading || s.Err == nil && !s.Short) {
		if s.Leading {
			t.deadline = s.Term.Deadline
		}
		return false, time.Time{} // safe, as it was
	}
	jp := t.jeopardy(now)
	if s.Leading {
		t.deadline = s.Term.Deadline
	}
	changed = jp.j.Update(now, s)
	since = jp.j.Since()
	jp.ever = jp.ever || !since.IsZero()
	return changed, since
}

// Announce wakes those waiting on JeopardyOf, if the jeopardy changed
// since they asked.
func (t *TermContext) Announce() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if jp := t.jp; jp != nil && jp.changed != nil && jp.j.Since() != jp.told {
		close(jp.changed)
		jp.changed = nil
	}
}

// WasInJeopardy reports whether the term was in jeopardy at some point.
func (t *TermContext) WasInJeopardy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.jp != nil && t.jp.ever
}

// Current returns the term's deadline as of the latest renewal.
func (t *TermContext) Current() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// Cancelled reports whether the context was cancelled, without checking
// its deadline (and cancelling it if it passed) as Err and Done do.
func (t *TermContext) Cancelled() bool { return t.Context.Err() != nil }

// ended cancels the context if the deadline has passed, and returns its
// error. A zero deadline is none: the simulator's naive baseline has none
// to check.
func (t *TermContext) ended() error {
	if d := t.Current(); !d.IsZero() && !t.clk.Now().Before(d) {
		t.cancel(errDeadline)
	}
	return t.Context.Err()
}

var errDeadline = errors.New("tenure: the term's deadline passed")

// Err checks the deadline first.
func (t *TermContext) Err() error { return t.ended() }

// Done checks the deadline first.
func (t *TermContext) Done() <-chan struct{} {
	t.ended()
	return t.Context.Done()
}

// TermOf returns the TermContext that ctx belongs to, or nil.
func TermOf(ctx context.Context) *TermContext {
	t, _ := ctx.Value(jeopardyKey{}).(*TermContext)
	return t
}

// JeopardyOf reports whether t's term is in jeopardy (tenure.JeopardyOf):
// since when its renewals have been failing (zero: they are not), the
// deadline, and a channel closed at the next change.
func (t *TermContext) JeopardyOf() (since, deadline time.Time, changed <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	jp := t.jeopardy(t.clk.Now())
	since = jp.j.Since()
	if jp.changed != nil && since != jp.told {
		close(jp.changed) // a change not yet announced: those who asked before learn of it
		jp.changed = nil
	}
	if jp.changed == nil {
		jp.changed, jp.told = make(chan struct{}), since
	}
	return since, t.deadline, jp.changed
}

// Meter counts what the glue of a Candidate, a Locker or a Group sees:
// tenure's OpenTelemetry instruments, or nothing in the simulator.
type Meter interface {
	Elected()
	Demoted(r election.Reason)
	Jeopardized(delta int64)
	Anomaly()
}

// NoMeter counts nothing.
type NoMeter struct{}

func (NoMeter) Elected()                {}
func (NoMeter) Demoted(election.Reason) {}
func (NoMeter) Jeopardized(int64)       {}
func (NoMeter) Anomaly()                {}

// FollowJeopardy takes a step's snapshot into the term's context, and logs
// and counts a change of its jeopardy; it returns since when the renewals
// have been failing (zero: they have not). The caller then announces it on
// the context (Announce), once its status says it.
func FollowJeopardy(tc *TermContext, now time.Time, s driver.Snapshot, ms Meter, log func(slog.Level, string, ...any), args ...any) time.Time {
	changed, since := tc.Publish(now, s)
	switch {
	case !changed:
	case !since.IsZero():
		ms.Jeopardized(1)
		log(slog.LevelWarn, "in jeopardy: renewals failing, or too little time left for one; the term ends at its deadline unless one lands",
			append(args, "since", since, "deadline", tc.Current(), "err", s.Err)...)
	default:
		ms.Jeopardized(-1)
		if s.Leading {
			log(slog.LevelInfo, "out of jeopardy: a renewal landed", args...)
		}
	}
	return since
}
