package host

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Core is a host without goroutines: the entries' timer heap, the store
// calls in flight and those waiting their turn (beyond MaxCalls), and the
// calls' timeouts, kept on the Core's clock like every other time. Its
// owner steps it, one event at a time: Fire with the time, Answer with a
// call's outcome. What it needs of the world, it asks through Calls:
// Host's loop starts each call on a goroutine; a simulator sends it over
// its network.
type Core struct {
	now      func() time.Time
	calls    Calls
	maxCalls int

	timers  timers
	waiting []*Flight // calls beyond maxCalls, in order
	timed   []*Flight // calls started with a timeout, in order of start
	running int
	made    uint64    // calls made
	free    []*Flight // flights answered, for the next calls

	// Tap, if set, sees each answer before its entry has it: the
	// simulator's checker.
	Tap func(f *Flight, res election.Result)
}

// Calls carries out a Core's store calls.
type Calls interface {
	// Start begins f's call; its outcome comes back through Core.Answer,
	// also once Abandon was called.
	Start(f *Flight)
	// Abandon gives up f's call, started: its context is cancelled.
	Abandon(f *Flight)
}

// NewCore returns a Core that reads the time with now and carries out its
// calls with calls, at most maxCalls at once (0: no bound).
func NewCore(now func() time.Time, calls Calls, maxCalls int) *Core {
	return &Core{now: now, calls: calls, maxCalls: maxCalls}
}

// Flight is a store call of an entry, from Call to its answer.
type Flight struct {
	e        Entry
	name     string
	op       election.Op
	timeout  time.Duration
	tag      uint8
	started  bool
	dropped  bool      // cancelled before it started
	done     bool      // answered: a later answer is ignored
	timedOut bool      // answered ErrTimeout by the Core
	late     bool      // abandoned: its call's own answer may come after the one given
	by       time.Time // its timeout, from its start; zero if it has none
	abandon  func()    // the loop's: cancel the call's context
	seq      uint64    // its order among the Core's calls, from 1
}

// TimedOut reports whether the Core gave the call up at its timeout (and
// answered it with election.ErrTimeout).
func (f *Flight) TimedOut() bool { return f.timedOut }

// Op returns the call's operation.
func (f *Flight) Op() *election.Op { return &f.op }

// Tag returns the tag the call was made with.
func (f *Flight) Tag() uint8 { return f.tag }

// Name returns the record the call is on.
func (f *Flight) Name() string { return f.name }

// Timeout returns the call's timeout; 0 if it runs until cancelled.
func (f *Flight) Timeout() time.Duration { return f.timeout }

// Call starts a store call of e on the record name: now, or once fewer
// than MaxCalls are in flight. A write's record is stamped with the time
// of the call (WrittenAt), and its answer carries the record written. A
// call with a timeout is abandoned once it has run that long by the
// Core's clock, and answered election.ErrTimeout; one without runs until
// Cancel. The answer comes to e.CallDone with this Flight, the tag to
// tell e's records apart. Once CallDone returns, the Flight is the Core's
// again (for a later call): e must not keep it, nor Cancel it.
func (c *Core) Call(e Entry, tag uint8, name string, op election.Op, timeout time.Duration) *Flight {
	op.Record.WrittenAt = c.now().Round(0).UTC()
	c.made++
	var f *Flight
	if n := len(c.free); n > 0 {
		f, c.free = c.free[n-1], c.free[:n-1]
	} else {
		f = new(Flight)
	}
	*f = Flight{e: e, name: name, op: op, timeout: timeout, tag: tag, seq: c.made}
	if c.maxCalls > 0 && c.running >= c.maxCalls {
		c.waiting = append(c.waiting, f)
		return f
	}
	c.start(f)
	return f
}

func (c *Core) start(f *Flight) {
	c.running++
	f.started = true
	if f.timeout > 0 {
		f.by = c.now().Add(f.timeout)
		c.timed = append(c.timed, f)
	}
	c.calls.Start(f)
}

// Cancel abandons f: a started call is abandoned (its answer still
// comes), a waiting one is dropped unanswered.
func (c *Core) Cancel(f *Flight) {
	switch {
	case f == nil:
	case f.started:
		f.late = true
		c.calls.Abandon(f)
	default:
		f.dropped = true
	}
}

// Answer takes the outcome of f's call: the next waiting call starts, and
// f's entry has it. The answer of a call the Core timed out is dropped.
func (c *Core) Answer(f *Flight, res election.Result) {
	if f.done {
		return
	}
	f.done = true
	if c.Tap != nil {
		c.Tap(f, res)
	}
	if !f.by.IsZero() {
		c.timed = slices.DeleteFunc(c.timed, func(o *Flight) bool { return o == f })
	}
	c.running--
	for len(c.waiting) > 0 && (c.maxCalls <= 0 || c.running < c.maxCalls) {
		w := c.waiting[0]
		c.waiting[0] = nil
		c.waiting = c.waiting[1:]
		if !w.dropped {
			c.start(w)
		}
	}
	e := f.e
	e.CallDone(f, res)
	c.Fix(e)
	if !f.timedOut && !f.late {
		// Its one answer is given: nobody holds it now. A flight timed
		// out or abandoned is left to the collector: its call's own
		// answer may still come.
		*f = Flight{}
		c.free = append(c.free, f)
	}
}

// Fire gives up the calls past their timeout (abandoned, answered
// election.ErrTimeout), then runs every entry due by now, earliest first
// (entries due at once in the order they first had a Due).
func (c *Core) Fire(now time.Time) {
	for len(c.timed) > 0 {
		i := slices.IndexFunc(c.timed, func(f *Flight) bool { return !now.Before(f.by) })
		if i < 0 {
			break
		}
		f := c.timed[i]
		f.timedOut, f.late = true, true
		c.calls.Abandon(f)
		c.Answer(f, election.Result{ID: f.op.ID, Record: f.op.Record, Err: election.ErrTimeout})
	}
	for e, due := c.timers.next(); e != nil && !due.After(now); e, due = c.timers.next() {
		e.Fire(now)
		c.Fix(e)
	}
}

// Next returns the earliest Due of the entries and timeout of the calls;
// zero if there is none.
func (c *Core) Next() time.Time {
	_, at := c.timers.next()
	for _, f := range c.timed {
		if at.IsZero() || f.by.Before(at) {
			at = f.by
		}
	}
	return at
}

// Fix puts e in the timer heap at its Due, or takes it out if it has
// none; call it when an entry's Due may have changed outside Fire and
// Answer.
func (c *Core) Fix(e Entry) { c.timers.fix(e) }

// Remove takes e out of the timer heap.
func (c *Core) Remove(e Entry) { c.timers.remove(e) }

// Canceled is the answer of f's call abandoned before the store answered:
// the error of a call whose context was cancelled.
func Canceled(f *Flight) election.Result {
	return election.Result{ID: f.op.ID, Record: f.op.Record, Err: fmt.Errorf("%v %q: %w", f.op.Kind, f.name, context.Canceled)}
}
