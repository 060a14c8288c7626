package sim

import (
	"math/rand/v2"
	"time"
)

// scenarios: leadership first, with a standby next, with stale reads, then locks.
var scenarios = append(append(append(leaderScenarios[:len(leaderScenarios):len(leaderScenarios)], standbyScenarios...), staleScenarios...), lockScenarios...)

var lockScenarios = []*Scenario{
	lockScenario("lock-contention", "12 clients contend for 2 locks with TryLock and Lock, waiting 1 to 40s", 12,
		func(p *plan, lp *lockPlan, r *rand.Rand) {}),
	lockScenario("lock-fair", "10 fair waiters queue for one lock: granted in ticket order", 10,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 5 * minute}
			lp.Hold = [2]time.Duration{200 * time.Millisecond, 2 * second}
			lp.Think = [2]time.Duration{0, second}
		}),
	lockScenario("lock-holder-crash", "holders and waiters of a fair lock crash and restart; their leases and queue entries are waited out", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 3 * minute}
			spells(p, r, span{20 * second, 40 * second}, 30*second, func() bool { return r.IntN(3) != 0 },
				span{second, 20 * second}, (*lnode).crash, (*lnode).boot)
		}),
	lockScenario("lock-holder-pause", "holders of a fair lock pause 2 to 40s, past their lease: their belief ends on their own clock", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 3 * minute}
			spells(p, r, span{30 * second, 60 * second}, 60*second, nil, span{2 * second, 40 * second}, (*lnode).pause, (*lnode).resume)
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
			spells(p, r, span{40 * second, 80 * second}, 30*second, nil, span{second, 20 * second}, (*lnode).crash, (*lnode).boot)
		}),
	lockScenario("lock-partition", "clients of a fair lock lose the store for 5 to 40s; 2% of requests fail", 8,
		func(p *plan, lp *lockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{10 * second, 3 * minute}
			p.Faults.ErrorPPM = 20_000
			spells(p, r, span{20 * second, 40 * second}, 60*second, func() bool { return r.IntN(2) == 0 },
				span{5 * second, 40 * second}, func(n *lnode) { n.setCut(true) }, func(n *lnode) { n.setCut(false) })
		}),
}

// span is a range of durations to draw from.
type span [2]time.Duration

// spells plans fault spells: the first at a gap drawn from gap, then each
// a further gap later, the last at least margin before the plan's end. A
// spell picks a node whose process holds a lock (or, when holder says
// false, one that waits; nil: always a holder), applies begin to it, and
// end after a length drawn from length.
func spells(p *plan, r *rand.Rand, gap span, margin time.Duration, holder func() bool, length span, begin, end func(*lnode)) {
	for t := uniform(r, gap[0], gap[1]); t < p.Duration-margin; t += uniform(r, gap[0], gap[1]) {
		h := holder == nil || holder()
		d := uniform(r, length[0], length[1])
		p.lat(t, func(w *lockWorld) {
			if n := w.pick(h); n != nil {
				begin(n)
				w.push(&lockEvent{at: w.now + d, f: func() { end(n) }})
			}
		})
	}
}

// pick returns the node of a process that believes it holds a lock
// (holder), or of one still waiting; nil if there is none. It draws from
// the store's generator, in event order.
func (w *lockWorld) pick(holder bool) *lnode {
	var c []*lnode
	for _, n := range w.nodes {
		if p := n.p; p != nil && !n.paused && !n.cut && p.lk != nil && p.believes() == holder {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}
