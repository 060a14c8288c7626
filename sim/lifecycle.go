package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Scenario actions: instances started, stopped, crashed and paused. They
// run as events, in both tiers alike. Once heal has run, actions that would
// inject a fault do nothing: scenarios draw their faults before the heal,
// but some land later (a pause armed for the next check, a restart after a
// delay).

// startOn starts a new instance with the given ID on n.
func (w *world) startOn(n *node, id string) *instance {
	n.starts++
	label := id
	same := 0
	for _, o := range w.insts {
		if o.ID == id {
			same++
		}
	}
	if same > 0 {
		label = fmt.Sprintf("%s#%d", id, same+1)
	}
	timing := n.spec.timing()
	in := &instance{
		w: w, node: n, num: len(w.insts), ID: id, label: label, timing: timing,
		cbRand:    rand.New(rand.NewPCG(w.seed, 0xcb00+uint64(len(w.insts)))),
		lcRand:    rand.New(rand.NewPCG(w.seed, 0x1c00+uint64(len(w.insts)))),
		resumedAt: -1,
	}
	w.insts = append(w.insts, in)
	n.cur = in
	w.running++
	w.fault(label, "start: lease %v, clock %s", timing.LeaseDuration, n.clockString(w.now))
	if w.tl != nil {
		w.tl.up(n, w.now)
	}
	in.rt = w.runtime(in)
	in.rt.start()
	return in
}

// restart starts the next process on n: with n's first ID, or with a new one.
func (w *world) restart(n *node, newID bool) *instance {
	id := n.Name
	if newID {
		id = fmt.Sprintf("%s%d", n.Name, n.starts+1)
	}
	return w.startOn(n, id)
}

// crash ends in at once: no release, no more requests; requests already on
// the wire still land.
func (w *world) crash(in *instance) {
	if !in.live() || w.healed {
		return
	}
	w.fault(in.label, "crash")
	w.upset = w.now
	w.chk.crashed(in)
	in.crashed = true
	if w.tl != nil {
		w.tl.down(in.node, w.now)
	}
	if in.paused {
		w.resume(in)
	}
	in.rt.crash()
}

// stop delivers the shutdown signal: Run's context is done.
func (w *world) stop(in *instance) {
	w.at(w.now, in, func() {
		w.fault(in.label, "stop")
		w.upset = w.now
		in.stopped = true
		in.rt.stop()
	})
}

// pause freezes in for d: nothing it waits for reaches it until it resumes.
// With freeze, the node's monotonic clock stands still too, as across a VM
// suspend, and its wall clock is stepped forward at the end.
func (w *world) pause(in *instance, d time.Duration, freeze bool) {
	if !in.live() || in.paused || w.healed {
		return
	}
	in.paused, in.frozen, in.pausedAt = true, freeze, w.now
	w.upset = w.now
	if freeze {
		w.fault(in.label, "suspend the VM for %v (clock stops)", d)
		w.setRate(in.node, ppbFrozen)
	} else {
		w.fault(in.label, "pause the process for %v", d)
	}
	w.chk.stats.Pauses++
	w.at(w.now+d, nil, func() { w.resume(in) })
}

func (w *world) resume(in *instance) {
	if !in.paused {
		return
	}
	n := in.node
	in.paused = false
	in.resumedAt, w.upset = w.now, w.now
	if in.frozen {
		in.frozen = false
		w.setRate(n, n.spec.PPB)
		n.clk.wall += w.now - in.pausedAt // NTP steps the wall clock to the time lost
		w.fault(in.label, "resume the VM; wall clock stepped %v", w.now-in.pausedAt)
	} else if !in.crashed {
		w.fault(in.label, "resume the process")
	}
	if w.tl != nil {
		w.tl.pause(n, in.pausedAt, w.now)
	}
	held := in.held
	in.held = nil
	for _, e := range held {
		e.at = w.now
		if e.req != nil {
			e.req.pending-- // push counts it again
		}
		if e.kind == evTimer {
			// Listed again, so that a change of rate at this same instant
			// (heal clamps rates) reschedules it rather than leaving the
			// event stale.
			e.epoch = n.epoch
			e.tm.slot = len(n.timers)
			n.timers = append(n.timers, e.tm)
		}
		w.push(e)
	}
}

// leader returns an instance that acts as leader now, or nil.
func (w *world) leader() *instance {
	if w.user != nil {
		return w.user.holder()
	}
	for _, in := range w.insts {
		if in.live() && w.chk.open[in] != nil {
			return in
		}
	}
	return nil
}

// liveInstances returns the instances running now, in order.
func (w *world) liveInstances() []*instance {
	var out []*instance
	for _, in := range w.insts {
		if in.live() {
			out = append(out, in)
		}
	}
	return out
}

// shutdown stops every instance, as at the end of a deployment.
func (w *world) shutdown() {
	if w.ending {
		return // a scenario ended the run early
	}
	w.fault("", "shut down every instance")
	w.chk.beforeShutdown()
	w.ending = true
	for _, in := range w.liveInstances() {
		if in.paused {
			w.resume(in)
		}
		w.stop(in)
	}
}

// machineRand seeds an instance's Candidate: distinct per instance, the
// same in both tiers.
func (w *world) machineRand(in *instance) *rand.Rand {
	return rand.New(rand.NewPCG(w.seed, 0xa11ce+uint64(in.num)))
}
