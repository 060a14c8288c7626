package sim

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// scenarios: leadership first, with a standby next, with stale reads, then locks.
var scenarios = append(append(append(append(append(append(leaderScenarios[:len(leaderScenarios):len(leaderScenarios)], standbyScenarios...), feedScenarios...), preferScenarios...), staleScenarios...), lockScenarios...), groupScenarios...)

var lockScenarios = []*Scenario{
	lockScenario("lock-contention", "12 clients contend for 2 locks with TryLock and Lock, waiting 1 to 40s", 12,
		func(p *plan, lp *lockPlan, r *rand.Rand) {}),
	lockScenario("lock-fair", "10 fair waiters queue for one lock: granted in ticket order", 10,
		func(p *plan, lp *lockPlan, r *rand.Rand) { busyQueue(lp) }),
	lockScenario("lock-holder-crash", "holders and waiters of a fair lock crash and restart; their leases and queue entries are waited out", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 3 * minute}
			spells(p, r, span{20 * second, 40 * second}, 30*second, func() bool { return r.IntN(3) != 0 },
				span{second, 20 * second}, crashFor)
		}),
	lockScenario("lock-holder-pause", "holders of a fair lock pause 2 to 40s, past their lease: their belief ends on their own clock", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 3 * minute}
			spells(p, r, span{30 * second, 60 * second}, 60*second, nil, span{2 * second, 40 * second},
				func(w *world, in *instance, d time.Duration) { w.pause(in, d, false) })
		}),
	lockScenario("lock-give-up", "fair waiters give up after 0.5 to 10s; the queue skips and drops their entries", 10,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{500 * time.Millisecond, 10 * second}
			lp.Hold = [2]time.Duration{second, 4 * second}
		}),
	lockScenario("lock-skew-drift", "wall clocks 10 to 60s apart and monotonic clocks drifting at ±ρ; holders crash", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			for _, n := range p.Nodes {
				n.skew(uniform(r, -60*second, 60*second))
				n.PPB = rhoPPB
				if r.IntN(2) == 0 {
					n.PPB = -rhoPPB
				}
			}
			spells(p, r, span{40 * second, 80 * second}, 30*second, nil, span{second, 20 * second}, crashFor)
		}),
	lockScenario("lock-partition", "clients of a fair lock lose the store for 5 to 40s; 2% of requests fail", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{10 * second, 3 * minute}
			p.Faults.ErrorPPM = 20_000
			spells(p, r, span{20 * second, 40 * second}, 60*second, func() bool { return r.IntN(2) == 0 },
				span{5 * second, 40 * second}, cutFor)
		}),
	lockScenario("lock-wake", "6 clients contend for 2 locks with TryLock and Lock; unlocks wake a waiter over a clean network, store latency has no tail, and 30% of polls are stale: a waiter woken at a free lock, or another, is granted it within the lock handoff bound", 6,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			p.Wake = &wakeFaults{}
			p.Latency = noTail // a bound well below a poll: a wake-up not acted on shows
			p.StaleReads = true
			p.Faults.StalePPM = 300_000
			p.Faults.StaleMax = uniform(r, 500*time.Millisecond, 3*second)
		}),
	lockScenario("lock-wake-fair", "8 fair waiters queue for one lock; each unlock wakes the head over a clean network, store latency has no tail: granted within the lock handoff bound", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			busyQueue(lp)
			p.Wake = &wakeFaults{}
			p.Latency = noTail
		}),
	lockScenario("lock-wake-faults", "wake-ups of a fair lock lost (up to half), duplicated, delayed up to 5s and forged in bursts of up to 20, while holders crash and clients lose the store: the lock stays exclusive and fair", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{10 * second, 3 * minute}
			p.Wake = forgingWake(r)
			p.Faults.ErrorPPM = 10_000
			spells(p, r, span{20 * second, 40 * second}, 30*second, func() bool { return r.IntN(3) != 0 },
				span{second, 20 * second}, crashFor)
			spells(p, r, span{30 * second, 60 * second}, 60*second, func() bool { return r.IntN(2) == 0 },
				span{5 * second, 30 * second}, cutFor)
			forgeNotices(p, r)
		}),
	lockScenario("lock-sem", "10 clients contend for 2 semaphores of 3 slots with TryLock and Lock; holders crash and pause past their lease, clients lose the store, wall clocks 10 to 60s apart: never more than 3 believe they hold a slot of a name", 10,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Slots = 3
			lp.Wait = [2]time.Duration{second, 60 * second}
			for _, n := range p.Nodes {
				n.skew(uniform(r, -60*second, 60*second))
			}
			p.Faults.ErrorPPM = 10_000
			spells(p, r, span{20 * second, 40 * second}, 30*second, nil, span{second, 20 * second}, crashFor)
			spells(p, r, span{30 * second, 60 * second}, 60*second, nil, span{2 * second, 40 * second},
				func(w *world, in *instance, d time.Duration) { w.pause(in, d, false) })
			spells(p, r, span{30 * second, 60 * second}, 60*second, func() bool { return r.IntN(2) == 0 },
				span{5 * second, 30 * second}, cutFor)
		}),
	lockScenario("lock-sem-resize", "10 clients ask for 2 or 3 slots of 2 semaphores while the count record that fixes n is deleted or released by force every 10 to 40s, holders crash: never more believe they hold a slot of a name than any of them asked for", 10,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Slots, lp.SlotsAlt = 3, 2
			lp.Wait = [2]time.Duration{second, 60 * second}
			for t := uniform(r, 10*second, 40*second); t < p.Duration-30*second; t += uniform(r, 10*second, 40*second) {
				name, release := "lock/"+strconv.Itoa(r.IntN(lp.Names)), r.IntN(2) == 0
				p.at(t, func(w *world) { w.loseCount(name, release) })
			}
			spells(p, r, span{20 * second, 40 * second}, 30*second, nil, span{second, 20 * second}, crashFor)
		}),
	lockScenario("lock-sem-fair", "8 fair waiters queue for a semaphore of 2 slots while holders crash: granted in ticket order across both slots", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			busyQueue(lp)
			lp.Slots = 2
			spells(p, r, span{20 * second, 40 * second}, 30*second, func() bool { return r.IntN(3) != 0 },
				span{second, 20 * second}, crashFor)
		}),
}

// busyQueue: every client waits, fair, for one lock, long enough to be
// served, holds it briefly and comes back soon.
func busyQueue(lp *lockPlan) {
	lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
	lp.Wait = [2]time.Duration{30 * second, 5 * minute}
	lp.Hold = [2]time.Duration{200 * time.Millisecond, 2 * second}
	lp.Think = [2]time.Duration{0, second}
}

// noTail is the healthy store's latency without its tail: the lock
// handoff bound is then about a tenth of a poll.
var noTail = latency{Min: healthyLatency.Min, Max: healthyLatency.Max}

// span is a range of durations to draw from.
type span [2]time.Duration

// spells plans fault spells: the first at a gap drawn from gap, then each
// a further gap later, the last at least margin before the plan's end. A
// spell picks a process that holds a lock (or, when holder says false, one
// that waits; nil: always a holder) and applies fault to it for a length
// drawn from length.
func spells(p *plan, r *rand.Rand, gap span, margin time.Duration, holder func() bool, length span, fault func(w *world, in *instance, d time.Duration)) {
	for t := uniform(r, gap[0], gap[1]); t < p.Duration-margin; t += uniform(r, gap[0], gap[1]) {
		h := holder == nil || holder()
		d := uniform(r, length[0], length[1])
		p.at(t, func(w *world) {
			if in := w.pick(h); in != nil {
				fault(w, in, d)
			}
		})
	}
}

// crashFor crashes in and starts a new process on its node d later.
func crashFor(w *world, in *instance, d time.Duration) {
	w.crash(in)
	w.at(w.now+d, nil, func() {
		if !w.ending && !in.node.cur.live() {
			w.restart(in.node, true)
		}
	})
}

// cutFor cuts in's node off from the store for d.
func cutFor(w *world, in *instance, d time.Duration) {
	w.cutOff(in.node, true)
	w.at(w.now+d, nil, func() { w.cutOff(in.node, false) })
}

// pick returns a lock client that believes it holds its lock (holder), or
// one still waiting; nil if there is none. It draws from the world's
// generator, in event order.
func (w *world) pick(holder bool) *instance {
	var c []*instance
	for _, in := range w.liveInstances() {
		l := in.rt.(lockProc).client()
		t := w.chk.open[in]
		if !in.paused && !in.node.cut && l.entry != nil && (t != nil && w.chk.believes(t)) == holder {
			c = append(c, in)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}
