package sim

import (
	"math/rand/v2"
	"time"
)

// scenarios: leadership first, then locks.
var scenarios = append(leaderScenarios[:len(leaderScenarios):len(leaderScenarios)], lockScenarios...)

var lockScenarios = []*Scenario{
	lockScenario("lock-contention", "12 clients contend for 2 locks with TryLock and Lock, waiting 1 to 40s", 12,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {}),
	lockScenario("lock-fair", "10 fair waiters queue for one lock: granted in ticket order", 10,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 5 * minute}
			lp.Hold = [2]time.Duration{200 * time.Millisecond, 2 * second}
			lp.Think = [2]time.Duration{0, second}
		}),
	lockScenario("lock-holder-crash", "holders and waiters of a fair lock crash and restart; their leases and queue entries are waited out", 8,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 3 * minute}
			for t := uniform(r, 20*second, 40*second); t < p.Duration-30*second; t += uniform(r, 20*second, 40*second) {
				holder, back := r.IntN(3) != 0, uniform(r, second, 20*second)
				p.lat(t, func(w *lockWorld) {
					if n := w.pick(holder); n != nil {
						n.crash()
						w.push(&lockEvent{at: w.now + back, f: n.boot})
					}
				})
			}
		}),
	lockScenario("lock-holder-pause", "holders of a fair lock pause 2 to 40s, past their lease: their belief ends on their own clock", 8,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{30 * second, 3 * minute}
			for t := uniform(r, 20*second, 40*second); t < p.Duration-60*second; t += uniform(r, 30*second, 60*second) {
				d := uniform(r, 2*second, 40*second)
				p.lat(t, func(w *lockWorld) {
					if n := w.pick(true); n != nil {
						n.pause()
						w.push(&lockEvent{at: w.now + d, f: n.resume})
					}
				})
			}
		}),
	lockScenario("lock-give-up", "fair waiters give up after 0.5 to 10s; the queue skips and drops their entries", 10,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{500 * time.Millisecond, 10 * second}
			lp.Hold = [2]time.Duration{second, 4 * second}
		}),
	lockScenario("lock-skew-drift", "wall clocks 10 to 60s apart and monotonic clocks drifting at ±ρ; holders crash", 8,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {
			for _, n := range p.Nodes {
				n.skew(uniform(r, -60*second, 60*second))
				n.PPB = rhoPPB
				if r.IntN(2) == 0 {
					n.PPB = -rhoPPB
				}
			}
			for t := uniform(r, 30*second, 60*second); t < p.Duration-30*second; t += uniform(r, 40*second, 80*second) {
				back := uniform(r, second, 20*second)
				p.lat(t, func(w *lockWorld) {
					if n := w.pick(true); n != nil {
						n.crash()
						w.push(&lockEvent{at: w.now + back, f: n.boot})
					}
				})
			}
		}),
	lockScenario("lock-partition", "clients of a fair lock lose the store for 5 to 40s; 2% of requests fail", 8,
		func(p *Plan, lp *LockPlan, r *rand.Rand) {
			lp.Names, lp.Fair, lp.TryOneIn = 1, true, 0
			lp.Wait = [2]time.Duration{10 * second, 3 * minute}
			p.Faults.ErrorPPM = 20_000
			for t := uniform(r, 20*second, 40*second); t < p.Duration-60*second; t += uniform(r, 20*second, 40*second) {
				holder, d := r.IntN(2) == 0, uniform(r, 5*second, 40*second)
				p.lat(t, func(w *lockWorld) {
					if n := w.pick(holder); n != nil {
						n.setCut(true)
						w.push(&lockEvent{at: w.now + d, f: func() { n.setCut(false) }})
					}
				})
			}
		}),
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
