package host

import (
	"time"

	"github.com/tenure-go/tenure/election"
)

// Core is a host without goroutines: the entries' timer heap, the store
// calls in flight and those waiting their turn (beyond MaxCalls). Its
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
	running int
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
	e       Entry
	name    string
	op      election.Op
	timeout time.Duration
	tag     uint8
	started bool
	dropped bool   // cancelled before it started
	abandon func() // the loop's: cancel the call's context
}

// Op returns the call's operation.
func (f *Flight) Op() *election.Op { return &f.op }

// Tag returns the tag the call was made with.
func (f *Flight) Tag() uint8 { return f.tag }

// Call starts a store call of e on the record name: now, or once fewer
// than MaxCalls are in flight. A write's record is stamped with the time
// of the call (WrittenAt), and its answer carries the record written. A
// call with a timeout is cancelled after it; one without runs until
// Cancel. The answer comes to e.CallDone with this Flight, the tag to
// tell e's records apart.
func (c *Core) Call(e Entry, tag uint8, name string, op election.Op, timeout time.Duration) *Flight {
	op.Record.WrittenAt = c.now().Round(0).UTC()
	f := &Flight{e: e, name: name, op: op, timeout: timeout, tag: tag}
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
	c.calls.Start(f)
}

// Cancel abandons f: a started call is abandoned (its answer still
// comes), a waiting one is dropped unanswered.
func (c *Core) Cancel(f *Flight) {
	switch {
	case f == nil:
	case f.started:
		c.calls.Abandon(f)
	default:
		f.dropped = true
	}
}

// Answer takes the outcome of f's call: the next waiting call starts, and
// f's entry has it.
func (c *Core) Answer(f *Flight, res election.Result) {
	c.running--
	for len(c.waiting) > 0 && (c.maxCalls <= 0 || c.running < c.maxCalls) {
		w := c.waiting[0]
		c.waiting[0] = nil
		c.waiting = c.waiting[1:]
		if !w.dropped {
			c.start(w)
		}
	}
	f.e.CallDone(f, res)
	c.Fix(f.e)
}

// Fire runs every entry due by now, earliest first (entries due at once
// in the order they first had a Due).
func (c *Core) Fire(now time.Time) {
	for e := c.timers.next(); e != nil && !e.Due().After(now); e = c.timers.next() {
		e.Fire(now)
		c.Fix(e)
	}
}

// Next returns the earliest Due of the entries; zero if none has one.
func (c *Core) Next() time.Time {
	if e := c.timers.next(); e != nil {
		return e.Due()
	}
	return time.Time{}
}

// Fix puts e in the timer heap at its Due, or takes it out if it has
// none; call it when an entry's Due may have changed outside Fire and
// Answer.
func (c *Core) Fix(e Entry) { c.timers.fix(e) }

// Remove takes e out of the timer heap.
func (c *Core) Remove(e Entry) { c.timers.remove(e) }
