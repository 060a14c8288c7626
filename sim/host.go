package sim

import "time"

// hostTimer models internal/host's one timer for a fast-tier process (a
// Candidate's or a lock client's): set at the earliest instant any of its
// entries is due, anew only when that instant changes.
//
// While one of the process's store calls has an event before that instant
// (its send, its arrival, its answer), the timer is owed rather than set:
// most instants set while a call is in flight are its timeout, replaced
// once it is answered a millisecond later, and so never become events.
// The call's events settle the debt (check).
type hostTimer struct {
	in     *instance
	eng    *engineHost // its calls in flight
	tm     *timer      // nil when there is none
	at     time.Time   // its instant
	owed   bool        // put off, at owedAt (monotonic)
	owedAt time.Duration
}

// set arms the timer at at (zero: none).
func (h *hostTimer) set(at time.Time) {
	if (h.tm != nil || h.owed) && at.Equal(h.at) {
		return
	}
	h.stop()
	h.at = at
	if at.IsZero() {
		return
	}
	if h.eng.owing() {
		h.owed, h.owedAt = true, max(sinceEpoch(at), h.in.node.clk.mono(h.in.w.now))
		h.check()
		return
	}
	h.tm = h.in.w.newTimer(h.in, srcRunner, sinceEpoch(at)-h.in.node.clk.mono(h.in.w.now))
}

// check sets the owed timer once no call in flight has an event before it.
func (h *hostTimer) check() {
	w := h.in.w
	if h.eng.eventBefore(h.in.node.clk.trueAt(w.now, h.owedAt)) {
		return
	}
	h.owed = false
	h.tm = &timer{in: h.in, target: h.owedAt}
	w.schedule(h.tm)
}

// fired reports whether tm is the timer (not one replaced), and forgets it.
func (h *hostTimer) fired(tm *timer) bool {
	if tm != h.tm {
		return false
	}
	h.tm = nil
	return true
}

func (h *hostTimer) stop() {
	h.owed = false
	if h.tm != nil {
		h.tm.dead = true
		h.tm = nil
	}
}

// owing is a fast-tier process with a hostTimer: the world lets it settle
// its debt after each event of one of its calls.
type owing interface{ settleOwed() }

// reusing is a fast-tier process whose requests are recycled: the world
// hands back each one none of whose events is left.
type reusing interface{ release(r *request) }
