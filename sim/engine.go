package sim

import (
	"errors"
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
	pending   []*request     // the calls in flight, in no order (request.slot)
	abandoned []*host.Flight // calls abandoned, their answers not yet given
	// answered, if set, sees each answer before the Core has it; started
	// each call as it starts.
	answered func(f *host.Flight, res election.Result, timedOut bool)
	started  func(f *host.Flight)
	// owes picks the calls whose events may put the timer off (hostTimer).
	owes owes
}

// owes picks the calls of a process whose events may put its timer off.
type owes uint8

const (
	owesAll   owes = iota
	owesLease      // the lease's only: a Candidate's standby calls run beside
	owesNone       // the timer is never put off
)

func (o owes) of(r *request) bool {
	return o == owesAll || o == owesLease && r.flight.Name() == leaseName
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
	r := w.call(in, *f.Op(), reg)
	r.flight, r.slot = f, len(h.pending)
	h.pending = append(h.pending, r)
}

// Abandon gives f's call up, as a cancelled context does: the request may
// still land, and its answer, the context's error, comes once the event
// under way is over (arm). A call the Core timed out it answers itself.
func (h *engineHost) Abandon(f *host.Flight) {
	i := slices.IndexFunc(h.pending, func(r *request) bool { return r.flight == f })
	if i < 0 {
		return
	}
	r := h.pending[i]
	h.take(r)
	r.abandoned = true
	if f.TimedOut() {
		if h.answered != nil {
			h.answered(f, election.Result{ID: f.Op().ID, Err: election.ErrTimeout}, true)
		}
		return
	}
	h.abandoned = append(h.abandoned, f)
}

// deliver takes the network's answer to r, and arms the timer.
func (h *engineHost) deliver(r *request) {
	h.deliverOnly(r)
	h.arm()
}

// deliverOnly takes the network's answer to r; the caller arms the timer.
func (h *engineHost) deliverOnly(r *request) {
	f := r.flight
	if f == nil {
		return // abandoned, or timed out
	}
	h.take(r)
	op := f.Op()
	res := election.Result{ID: op.ID, Record: op.Record, Err: r.res.err}
	switch op.Kind {
	case election.OpGet:
		res.Record, res.Version = r.res.rec, r.res.ver
	case election.OpPut:
		res.Version = r.res.ver
	}
	h.give(f, res, false)
}

// give passes f's answer to the Core.
func (h *engineHost) give(f *host.Flight, res election.Result, timedOut bool) {
	if h.answered != nil {
		h.answered(f, res, timedOut)
	}
	h.core.Answer(f, res)
}

// take removes r from the calls in flight.
func (h *engineHost) take(r *request) {
	last := h.pending[len(h.pending)-1]
	h.pending[r.slot], last.slot = last, r.slot
	h.pending[len(h.pending)-1] = nil
	h.pending = h.pending[:len(h.pending)-1]
	r.flight = nil
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
		f := h.abandoned[0]
		h.abandoned = slices.Delete(h.abandoned, 0, 1)
		h.give(f, host.Canceled(f), false)
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
	for _, r := range h.pending {
		if h.owes.of(r) {
			return true
		}
	}
	return false
}

// eventBefore reports whether a call in flight that may put the timer off
// has an event before the true time t (or has not been sent).
func (h *engineHost) eventBefore(t time.Duration) bool {
	for _, r := range h.pending {
		if h.owes.of(r) && (!r.sent || r.next != never && r.next < t) {
			return true
		}
	}
	return false
}

// leaseCall returns the request of the lease's call in flight, or nil.
func (h *engineHost) leaseCall() *request {
	for _, r := range h.pending {
		if r.flight.Name() == leaseName {
			return r
		}
	}
	return nil
}

// release hands r back to the world's spares once no call waits on it.
func (h *engineHost) release(r *request) {
	if r.flight == nil {
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
