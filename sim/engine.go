package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/lease"
)

// engineHost is a fast-tier process's host: the production host.Core
// (internal/host) stepped by the world, its calls sent over the simulated
// network, one timer (hostTimer) at the Core's Next (its entries' Due and
// its calls' timeouts). What host.Host does with goroutines, it does with
// the world's events: an abandoned call's answer (its goroutine's, the
// context cancelled) comes right after the event that abandoned it.
type engineHost struct {
	in        *instance
	w         *world
	core      *host.Core
	ht        hostTimer
	pending   []*engineCall // calls in flight, in no order (engineCall.i)
	abandoned []*engineCall // calls abandoned, their answers not yet given
	// answered, if set, sees each answer before the Core has it; started
	// each call as it starts.
	answered func(f *host.Flight, res election.Result, timedOut bool)
	started  func(f *host.Flight)
	// owes, if set, picks the calls whose events may put the timer off
	// (hostTimer); nil: every call's.
	owes func(c *engineCall) bool
}

// engineCall is a call of the Core in flight.
type engineCall struct {
	f *host.Flight
	r *request
	i int // its index in pending
}

func newEngineHost(in *instance) *engineHost {
	h := &engineHost{in: in, w: in.w}
	h.ht = hostTimer{in: in, eng: h}
	h.core = host.NewCore(in.local, h, 0)
	return h
}

// Start sends f's call over the network, with its timeout as a timer.
func (h *engineHost) Start(f *host.Flight) {
	w, in := h.w, h.in
	var reg *register
	if f.Name() != leaseName {
		reg = w.store.register(f.Name())
	}
	if h.started != nil {
		h.started(f)
	}
	c := &engineCall{f: f, r: w.call(in, *f.Op(), reg), i: len(h.pending)}
	c.r.call = c
	h.pending = append(h.pending, c)
}

// Abandon gives f's call up, as a cancelled context does: the request may
// still land, and its answer, the context's error, comes once the event
// under way is over (arm). A call the Core timed out it answers itself.
func (h *engineHost) Abandon(f *host.Flight) {
	i := slices.IndexFunc(h.pending, func(c *engineCall) bool { return c.f == f })
	if i < 0 {
		return
	}
	c := h.pending[i]
	h.take(c)
	c.r.abandoned = true
	if f.TimedOut() {
		if h.answered != nil {
			h.answered(f, election.Result{ID: f.Op().ID, Err: election.ErrTimeout}, true)
		}
		return
	}
	h.abandoned = append(h.abandoned, c)
}

// failure is the answer of c's call whose context ended with err, as the
// store returns it.
func (h *engineHost) failure(c *engineCall, err error) election.Result {
	op := c.f.Op()
	return election.Result{ID: op.ID, Record: op.Record, Err: fmt.Errorf("%v %q: %w", op.Kind, c.f.Name(), err)}
}

// deliver takes the network's answer to r, and arms the timer.
func (h *engineHost) deliver(r *request) {
	h.deliverOnly(r)
	h.arm()
}

// deliverOnly takes the network's answer to r; the caller arms the timer.
func (h *engineHost) deliverOnly(r *request) {
	c := r.call
	if c == nil {
		return // abandoned, or timed out
	}
	h.take(c)
	op := c.f.Op()
	res := election.Result{ID: op.ID, Record: op.Record, Err: r.res.err}
	switch op.Kind {
	case election.OpGet:
		res.Record, res.Version = r.res.rec, r.res.ver
	case election.OpPut:
		res.Version = r.res.ver
	}
	h.give(c.f, res, false)
}

// give passes f's answer to the Core.
func (h *engineHost) give(f *host.Flight, res election.Result, timedOut bool) {
	if h.answered != nil {
		h.answered(f, res, timedOut)
	}
	h.core.Answer(f, res)
}

// take removes c from the calls in flight.
func (h *engineHost) take(c *engineCall) {
	last := h.pending[len(h.pending)-1]
	h.pending[c.i], last.i = last, c.i
	h.pending[len(h.pending)-1] = nil
	h.pending = h.pending[:len(h.pending)-1]
	c.r.call = nil
}

// fired, if tm is the host's timer, steps the Core: calls past their
// timeout, then entries due.
func (h *engineHost) fired(tm *timer) bool {
	if !h.ht.fired(tm) {
		return false
	}
	h.core.Fire(h.in.local())
	h.arm()
	return true
}

// flush gives the abandoned calls their answers.
func (h *engineHost) flush() {
	for len(h.abandoned) > 0 {
		c := h.abandoned[0]
		h.abandoned = slices.Delete(h.abandoned, 0, 1)
		h.give(c.f, h.failure(c, context.Canceled), false)
	}
}

// arm answers the abandoned calls, then sets the host's timer at the
// Core's Next.
func (h *engineHost) arm() {
	h.flush()
	h.ht.set(h.core.Next())
}

func (h *engineHost) settleOwed() {
	if h.ht.owed {
		h.ht.check()
	}
}

// owing reports whether a call in flight may put the timer off.
func (h *engineHost) owing() bool {
	for _, c := range h.pending {
		if h.owes == nil || h.owes(c) {
			return true
		}
	}
	return false
}

// eventBefore reports whether a call in flight that may put the timer off
// has an event before the true time t (or has not been sent).
func (h *engineHost) eventBefore(t time.Duration) bool {
	for _, c := range h.pending {
		r := c.r
		if (h.owes == nil || h.owes(c)) && (!r.sent || r.next != never && r.next < t) {
			return true
		}
	}
	return false
}

// release hands r back to the world's spares once no call waits on it.
func (h *engineHost) release(r *request) {
	if r.call == nil {
		h.w.spareReqs = append(h.w.spareReqs, r)
	}
}

// failedCall reports whether res is a failure of a call with a timeout (a
// queue's, a wake record's, a count's: not a lock's): one a fair waiter
// may lose its place over (lockClient.upset).
func failedCall(f *host.Flight, res election.Result, timedOut bool) bool {
	return f.Timeout() > 0 && (timedOut || res.Err != nil && !errors.Is(res.Err, lease.ErrConflict) && !errors.Is(res.Err, lease.ErrNotFound))
}

// stop stops the timer: the process is over.
func (h *engineHost) stop() { h.ht.stop() }

var _ host.Calls = (*engineHost)(nil)
