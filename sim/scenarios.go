package sim

import (
	"math/rand/v2"
	"time"
)

const (
	second = time.Second
	minute = time.Minute
)

var leaderScenarios = []*Scenario{
	{
		Name:    "steady-state",
		Summary: "a healthy store for ten minutes: one term throughout",
		build:   func(p *plan, r *rand.Rand) { p.Duration = 10 * minute },
	},
	{
		Name:    "leader-crash",
		Summary: "the leader crashes three times; a new leader within the failover bound each time",
		build: func(p *plan, r *rand.Rand) {
			crashLeaders(p, r, uniform(r, 30*second, 60*second))
		},
	},
	{
		Name:    "graceful-release",
		Summary: "the leader shuts down three times; its release hands over within a poll interval",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 20*second, 40*second)
			for range 3 {
				stopLeader(p, t, uniform(r, 5*second, 15*second))
				t += uniform(r, 40*second, 60*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "constant-skew",
		Summary: "wall clocks 20 to 40s apart; the most advanced node joins late; leaders crash",
		build: func(p *plan, r *rand.Rand) {
			skews := []time.Duration{-40 * second, -20 * second, 0, 20 * second, 40 * second}
			r.Shuffle(len(skews), func(i, j int) { skews[i], skews[j] = skews[j], skews[i] })
			for i, n := range p.Nodes {
				n.skew(skews[i] + uniform(r, -2*second, 2*second))
				if skews[i] == 40*second {
					n.Start = 20 * second // a follower, at first
				}
			}
			crashLeader(p, uniform(r, 60*second, 90*second), 15*second, false)
			crashLeader(p, uniform(r, 150*second, 180*second), 15*second, false)
			p.Duration = 4 * minute
		},
	},
	{
		Name:    "ntp-step",
		Summary: "wall clocks of the leader and of followers are stepped by 30s to 2min",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 30*second, 60*second)
			back := -uniform(r, 30*second, 2*minute)
			p.at(t, func(w *world) { stepLeader(w, back) })
			t += uniform(r, 30*second, 60*second)
			ahead, k := uniform(r, 30*second, 2*minute), r.IntN(1000)
			p.at(t, func(w *world) { stepFollower(w, k, ahead) })
			t += uniform(r, 30*second, 60*second)
			ahead2, back2, k2 := uniform(r, 30*second, 2*minute), -uniform(r, 30*second, 2*minute), r.IntN(1000)
			p.at(t, func(w *world) {
				stepLeader(w, ahead2)
				stepFollower(w, k2, back2)
			})
			p.Duration = t + minute
		},
	},
	{
		Name:    "drift-at-bound",
		Summary: "the leader's clock runs ρ slow, the others' ρ fast, 1µs margin; the leader is cut off right after a renewal",
		build:   driftProbe(1),
	},
	{
		Name:    "drift-beyond-bound",
		Summary: "as drift-at-bound with clocks 20ρ off: I1 may fail, fencing must hold",
		build:   driftProbe(20),
	},
	{
		Name:    "gc-pause",
		Summary: "the leader pauses between its check and its write for 20 to 60s, then writes as a zombie",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 20*second, 40*second)
			long := uniform(r, 20*second, 60*second)
			pauseAtCheck(p, t, long)
			t += long + uniform(r, 30*second, 60*second)
			pauseAtCheck(p, t, uniform(r, 200*time.Millisecond, 3*second)) // shorter than a lease: harmless
			p.Duration = t + minute
			p.Requires = All.Without(OneLeader)
		},
	},
	{
		Name:    "vm-suspend",
		Summary: "the leader's VM is suspended 1 to 4min between a check and a write: its monotonic clock stops, its wall clock is stepped on resume",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 20*second, 60*second)
			d := uniform(r, minute, 4*minute)
			p.atLeader(t, "suspend", func(w *world, l *instance) {
				w.arm(l, hookCheck, func() {
					w.pause(l, d, true)
					w.expectLeader(w.failoverBound(l), "suspend of "+l.label)
				})
			})
			p.Duration = t + d + minute
			// A clock that stops is drift without bound: the zombie believes
			// its term is young, so even its term may overlap a newer one.
			p.Requires = All.Without(OneLeader, Tokens)
		},
	},
	{
		Name:    "leader-cut-off",
		Summary: "the leader loses the store for 20 to 90s while it keeps running",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 30*second, 60*second)
			for range 2 {
				d := uniform(r, 20*second, 90*second)
				p.atLeader(t, "cut off", func(w *world, l *instance) { cutOffFor(w, l, d) })
				t += d + uniform(r, 30*second, 60*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "long-tail-latency",
		Summary: "one request in 8 takes up to 8s (OpTimeout is 2s): abandoned calls, writes that land late",
		build: func(p *plan, r *rand.Rand) {
			p.Latency = latency{Min: time.Millisecond, Max: 50 * time.Millisecond, TailOneIn: 8, TailMax: 8 * second}
			p.Failover = false
			crashLeader(p, uniform(r, 60*second, 120*second), 20*second, false)
			healAt(p, 4*minute)
		},
	},
	{
		Name:    "lost-renewal-response",
		Summary: "30 to 60% of renewals apply but their answer is lost (or a reset)",
		build: func(p *plan, r *rand.Rand) {
			p.Faults = faults{LostRenewPPM: int(uniform(r, 300_000, 600_000)), LostAsErrorPPM: 500_000}
			p.Failover = false
			crashLeader(p, uniform(r, 100*second, 150*second), 20*second, false)
			healAt(p, 4*minute)
		},
	},
	{
		Name:    "lost-takeover-response",
		Summary: "50 to 90% of takeovers apply but their answer is lost (or a reset); leaders crash often",
		build: func(p *plan, r *rand.Rand) {
			p.Faults = faults{LostTakeoverPPM: int(uniform(r, 500_000, 900_000)), LostAsErrorPPM: 500_000}
			p.Failover = false
			for t := uniform(r, 30*second, 40*second); t < 3*minute; t += uniform(r, 40*second, 60*second) {
				crashLeader(p, t, uniform(r, 5*second, 20*second), r.IntN(2) == 0)
			}
			healAt(p, 4*minute)
		},
	},
	{
		Name:    "delayed-write",
		Summary: "10 to 30% of writes land up to 20s after their writer gave up on them",
		build: func(p *plan, r *rand.Rand) {
			p.Faults = faults{DelayPutPPM: int(uniform(r, 100_000, 300_000)), DelayMax: 20 * second}
			p.Failover = false
			for t := uniform(r, 40*second, 60*second); t < 3*minute; t += uniform(r, 50*second, 70*second) {
				crashLeader(p, t, uniform(r, 5*second, 20*second), false)
			}
			healAt(p, 4*minute)
		},
	},
	{
		Name:    "simultaneous-takeover",
		Summary: "identical clocks and latencies: every node starts, and later restarts, at the same instant",
		build: func(p *plan, r *rand.Rand) {
			p.Latency = latency{Min: 5 * time.Millisecond, Max: 5 * time.Millisecond}
			for _, n := range p.Nodes {
				n.PPB, n.Start = 0, 0
			}
			for _, t := range []time.Duration{uniform(r, 40*second, 60*second), uniform(r, 100*second, 120*second)} {
				p.at(t, func(w *world) {
					bound := time.Duration(0)
					if l := w.leader(); l != nil {
						bound = w.failoverBound(l)
					}
					for _, in := range w.liveInstances() {
						w.crash(in)
					}
					w.at(w.now+second, nil, func() {
						for _, n := range w.nodes {
							w.restart(n, true)
						}
						if bound > 0 {
							w.expectLeader(bound, "restart of every node")
						}
					})
				})
			}
			p.at(uniform(r, 160*second, 180*second), func(w *world) {
				if l := w.leader(); l != nil {
					w.stop(l)
					w.expectLeader(w.releaseBound(l), "release by "+l.label)
				}
			})
			p.Duration = 4 * minute
		},
	},
	{
		Name:    "partition-flapping",
		Summary: "every node loses and regains the store at random, for 0.5 to 15s at a time",
		build: func(p *plan, r *rand.Rand) {
			for i := range p.Nodes {
				for t := uniform(r, 0, 10*second); t < 4*minute; {
					d := uniform(r, 500*time.Millisecond, 15*second)
					p.at(t, func(w *world) { w.cutOff(w.nodes[i], true) })
					p.at(t+d, func(w *world) { w.cutOff(w.nodes[i], false) })
					t += d + uniform(r, second, 30*second)
				}
			}
			healAt(p, 4*minute+20*second)
		},
	},
	{
		Name:    "store-brownout",
		Summary: "two to four spells of 10 to 40s: requests take up to 5s and 30 to 70% fail",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 20*second, 40*second)
			for i := 0; i < 2+r.IntN(3) && t < 3*minute+30*second; i++ {
				d := uniform(r, 10*second, 40*second)
				errs := int(uniform(r, 300_000, 700_000))
				p.at(t, func(w *world) {
					w.fault("", "store brownout begins")
					w.store.lat = latency{Min: 100 * time.Millisecond, Max: 1500 * time.Millisecond, TailOneIn: 4, TailMax: 5 * second}
					w.store.f.ErrorPPM = errs
				})
				p.at(t+d, func(w *world) { w.endBrownout() })
				t += d + uniform(r, 20*second, 40*second)
			}
			healAt(p, 4*minute)
		},
	},
	{
		Name:    "restart-same-identity",
		Summary: "the leader crashes and comes back with the same ID, before its lease ran out, or at once with a renewal on the wire",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 30*second, 60*second)
			crashLeader(p, t, uniform(r, 100*time.Millisecond, 5*second), false)
			t += uniform(r, 60*second, 90*second)
			p.atLeader(t, "crash", func(w *world, l *instance) {
				w.arm(l, hookRenewalSent, func() {
					w.crash(l)
					w.expectLeader(w.failoverBound(l), "crash of "+l.label)
					w.restart(l.node, false)
				})
			})
			t += uniform(r, 60*second, 90*second)
			crashLeader(p, t, 0, false)
			p.Duration = t + minute
		},
	},
	{
		Name:    "mixed-ttl",
		Summary: "nodes ask for leases of 2s to 30s; followers wait out the holder's, not their own",
		build:   mixedTTLs,
	},
	{
		Name:    "slow-callbacks",
		Summary: "half the callbacks take seconds (OnElected's cleanup up to 20s); leaders crash, are cut off and stop",
		build: func(p *plan, r *rand.Rand) {
			p.Slow = &slow{OneIn: 2, Cleanup: 20 * second, Demoted: 5 * second, Leader: 15 * second}
			t := uniform(r, 40*second, 60*second)
			crashLeader(p, t, 10*second, false)
			t += uniform(r, 50*second, 70*second)
			p.at(t, func(w *world) {
				if l := w.leader(); l != nil {
					cutOffFor(w, l, 30*second)
				}
			})
			t += uniform(r, 50*second, 70*second)
			p.at(t, func(w *world) {
				if l := w.leader(); l != nil {
					// The release waits for slow callbacks; expiry bounds it.
					w.stop(l)
					w.expectLeader(w.failoverBound(l), "stop of "+l.label)
					restartLater(w, l.node, 30*second, false)
				}
			})
			p.Duration = t + 90*second
		},
	},
	{
		Name:    "stop-during-renewal",
		Summary: "the leader shuts down just after sending a renewal, half of whose answers are lost",
		build: func(p *plan, r *rand.Rand) {
			p.Faults = faults{LostRenewPPM: 500_000, LostAsErrorPPM: 300_000}
			t := uniform(r, 20*second, 40*second)
			for range 3 {
				p.atLeader(t, "stop", func(w *world, l *instance) {
					w.arm(l, hookRenewalSent, func() {
						w.stop(l)
						// An answer lost in silence costs an OpTimeout and a
						// read-back before the release goes out.
						w.expectLeader(l.timing.OpTimeout+2*w.rtt()+w.releaseBound(l), "stop of "+l.label+" during a renewal")
						restartLater(w, l.node, 20*second, false)
					})
				})
				t += uniform(r, 40*second, 60*second)
			}
			p.Duration = t + 30*second
		},
	},
	{
		Name:    "swarm",
		Summary: "every knob drawn from the seed, then every fault heals and one leader must emerge",
		build:   swarm,
	},
	{
		Name:    "record-lost",
		Summary: "the lease record vanishes four times under a live leader: at random, during a pause of the leader, right after a renewal",
		build: func(p *plan, r *rand.Rand) {
			t := uniform(r, 20*second, 40*second)
			for range 4 {
				switch r.IntN(3) {
				case 0:
					p.at(t, func(w *world) { w.loseRecord() })
				case 1:
					// The leader is paused (less than its lead window) and
					// the record vanishes meanwhile: on waking, its
					// renewal finds it gone.
					d := uniform(r, 200*time.Millisecond, 5*second)
					off := uniform(r, 0, d)
					p.at(t, func(w *world) {
						if l := w.leader(); l != nil {
							w.pause(l, d, false)
						}
					})
					p.at(t+off, func(w *world) { w.loseRecord() })
				default:
					delay := uniform(r, 0, 20*time.Millisecond)
					p.at(t, func(w *world) {
						l := w.leader()
						if l == nil {
							w.loseRecord()
							return
						}
						w.arm(l, hookRenewed, func() { w.at(w.now+delay, nil, w.loseRecord) })
					})
				}
				t += uniform(r, 40*second, 70*second)
			}
			healAt(p, t)
		},
	},
	{
		Name:    "lost-writes",
		Summary: "a store that may lose acknowledged writes (lease.Lossy: Redis, NATS) fails over four times, cutting everyone off for 5 to 15s and coming back as it was 1 to 3s before, soon after the leader shut down, crashed or paused past its lease, so that a release or a takeover is lost: no token goes back (every takeover mints from the wall clock), a lost term's fenced writes are refused; two may believe at once until the lost term's next renewal",
		build: func(p *plan, r *rand.Rand) {
			p.Lossy = true
			p.Failover = false                  // a failover cuts everyone off: no bound holds across it
			p.Requires = All.Without(OneLeader) // the holder of a lost takeover believes until its next renewal
			t := uniform(r, 30*second, 50*second)
			for range 4 {
				var after time.Duration
				switch r.IntN(3) {
				case 0: // the release, and the takeover that follows at once
					after = uniform(r, 0, 2*second)
					p.atLeader(t, "stop", func(w *world, l *instance) {
						w.stop(l)
						restartLater(w, l.node, 5*second, false)
					})
				case 1: // the takeover a lease later
					after = uniform(r, 9*second, 14*second)
					p.atLeader(t, "crash", func(w *world, l *instance) {
						w.crash(l)
						restartLater(w, l.node, 20*second, false)
					})
				default: // a zombie that comes back to the record as it was before the takeover
					after = uniform(r, 9*second, 14*second)
					d := uniform(r, 12*second, 25*second)
					p.atLeader(t, "pause", func(w *world, l *instance) { w.pause(l, d, false) })
				}
				lose, down := uniform(r, second, 3*second), uniform(r, 5*second, 15*second)
				p.at(t+after, func(w *world) { w.failover(lose, down) })
				t += uniform(r, 60*second, 80*second)
			}
			healAt(p, t)
		},
	},
	{
		Name:    "foreign-restore",
		Summary: "an older record (a restored backup), released or held, is written back three times under a live leader",
		build: func(p *plan, r *rand.Rand) {
			// A graceful handoff first, so that there is a released record
			// to write back: one that followers would take at once.
			p.at(uniform(r, 15*second, 25*second), func(w *world) {
				if l := w.leader(); l != nil {
					w.stop(l)
					restartLater(w, l.node, 5*second, false)
				}
			})
			t := uniform(r, 40*second, 60*second)
			for i := range 3 {
				frac, released := r.Float64(), i == 0 || r.IntN(2) == 0
				p.at(t, func(w *world) { w.restoreRecord(frac, released) })
				t += uniform(r, 40*second, 70*second)
			}
			healAt(p, t)
		},
	},
}

// crashLeader crashes whoever leads at t and, unless restart is negative,
// starts a new process on its node that much later.
func crashLeader(p *plan, t, restart time.Duration, newID bool) {
	p.atLeader(t, "crash", func(w *world, l *instance) {
		w.crash(l)
		if w.plan.Failover {
			w.expectLeader(w.failoverBound(l), "crash of "+l.label)
		}
		if restart >= 0 {
			restartLater(w, l.node, restart, newID)
		}
	})
}

// crashLeaders crashes the leader three times from t on, 60 to 90s apart.
func crashLeaders(p *plan, r *rand.Rand, t time.Duration) {
	for range 3 {
		crashLeader(p, t, uniform(r, 10*second, 40*second), r.IntN(2) == 0)
		t += uniform(r, 60*second, 90*second)
	}
	p.Duration = t
}

// cutOffFor cuts the leader l off from the store for d; a new leader is
// expected within the failover bound.
func cutOffFor(w *world, l *instance, d time.Duration) {
	w.cutOff(l.node, true)
	w.expectLeader(w.failoverBound(l), "cut-off of "+l.label)
	n := l.node
	w.at(w.now+d, nil, func() { w.cutOff(n, false) })
}

// atLeader runs f on the leader at true time t; with none, the trace says
// there was no leader to act on.
func (p *plan) atLeader(t time.Duration, act string, f func(w *world, l *instance)) {
	p.at(t, func(w *world) {
		if l := w.leader(); l != nil {
			f(w, l)
			return
		}
		w.fault("", "no leader to %s", act)
	})
}

// stopLeader shuts the leader down at t and restarts it back later; a new
// leader is expected within the handoff bound.
func stopLeader(p *plan, t, back time.Duration) {
	p.atLeader(t, "stop", func(w *world, l *instance) {
		bound := w.handoffBound(l)
		w.stop(l)
		w.expectLeader(bound, "release by "+l.label)
		restartLater(w, l.node, back, false)
	})
}

func restartLater(w *world, n *node, d time.Duration, newID bool) {
	w.at(w.now+d, nil, func() {
		if n.cur == nil || !n.cur.live() {
			w.restart(n, newID)
		}
	})
}

// healAt ends every fault at t and leaves time for a leader to emerge and
// be seen by all.
func healAt(p *plan, t time.Duration) {
	var ttl time.Duration
	for _, n := range p.Nodes {
		ttl = max(ttl, n.Timing.LeaseDuration, 10*second)
	}
	p.at(t, func(w *world) {
		w.heal()
		w.expectConverged(w.convergeBound())
	})
	p.Duration = t + 4*ttl + 90*second
}

func pauseAtCheck(p *plan, t, d time.Duration) {
	p.atLeader(t, "pause", func(w *world, l *instance) {
		w.arm(l, hookCheck, func() {
			w.pause(l, d, false)
			if d > l.timing.LeaseDuration {
				w.expectLeader(w.failoverBound(l), "pause of "+l.label)
			}
		})
	})
}

func stepLeader(w *world, d time.Duration) {
	if l := w.leader(); l != nil {
		w.stepWall(l.node, d)
	}
}

// stepFollower steps the wall clock of the k-th (modulo) node that does not lead.
func stepFollower(w *world, k int, d time.Duration) {
	l := w.leader()
	var fs []*node
	for _, n := range w.nodes {
		if l == nil || n != l.node {
			fs = append(fs, n)
		}
	}
	if len(fs) > 0 {
		w.stepWall(fs[k%len(fs)], d)
	}
}

// driftProbe makes the worst case of drift at factor×ρ: just before the
// leader is cut off, its clock runs slow and the others' run fast, so that
// its deadline is as late and their takeover as early in true time as the
// rates allow. A 1µs margin, and a cut-off only after a renewal that a
// follower read within 8ms of its landing, leave only the ρ terms of the
// protocol between them.
//
// Fast polls are most of a run's cost, so only two nodes poll every 50ms: as
// the lease passes from one to the other at each cut-off, one fast follower
// always watches, and reads within 8ms of about one renewal in six. (Faster
// polls would find such a renewal sooner, in as many polls, and spend more
// while the leader is cut off.) The third polls at the default pace, a
// contender whose clock also runs fast. A cut-off lasts until just past the
// takeover, and the next one follows once the new leader renews; the run
// ends a little after the last.
func driftProbe(factor int64) func(p *plan, r *rand.Rand) {
	return func(p *plan, r *rand.Rand) {
		// A cut-off needs 13s, and a takeover's bound ends within 15s of it.
		const cuts, readWithin, end = 4, 8 * time.Millisecond, 200 * second
		rate := factor * rhoPPB
		p.Latency = latency{Min: 50 * time.Microsecond, Max: 500 * time.Microsecond}
		p.Nodes = p.Nodes[:3]
		for i, n := range p.Nodes {
			n.Timing.Margin = time.Microsecond
			if i < 2 {
				n.Timing.PollInterval = 50 * time.Millisecond
			}
			n.PPB, n.Start = rate, uniform(r, 100*time.Millisecond, second)
			if i == 0 {
				n.PPB, n.Start = -rate, 0
			}
		}
		gaps := make([]time.Duration, cuts)
		for k := range gaps {
			gaps[k] = uniform(r, 2*second, 4*second)
		}
		var probe func(w *world, k int)
		probe = func(w *world, k int) {
			l := w.leader()
			if l == nil {
				w.fault("", "no leader to cut off")
				return
			}
			for _, n := range w.nodes {
				if n == l.node {
					w.rate(n, -rate)
				} else {
					w.rate(n, rate)
				}
			}
			var renewed func()
			renewed = func() {
				w.at(w.now+readWithin, nil, func() {
					switch {
					case w.now+15*second > end:
					case w.leader() != l:
						probe(w, k)
					case !w.store.readSoon(readWithin):
						w.arm(l, hookRenewed, renewed)
					default:
						w.cutOff(l.node, true)
						w.expectLeader(w.failoverBound(l), "cut-off of "+l.label)
						n := l.node
						w.at(w.now+13*second, nil, func() {
							w.cutOff(n, false)
							if k+1 < cuts {
								w.at(w.now+gaps[k], nil, func() { probe(w, k+1) })
							} else {
								w.at(w.now+gaps[k], nil, w.shutdown)
							}
						})
					}
				})
			}
			w.arm(l, hookRenewed, renewed)
		}
		p.at(uniform(r, 5*second, 10*second), func(w *world) { probe(w, 0) })
		p.Duration = end
		if factor > 1 {
			p.Requires = All.Without(OneLeader, Tokens)
		}
	}
}

// swarm draws every knob from the seed: nodes, timings, clocks, the store's
// latency and faults, and a stream of crashes, restarts, pauses,
// partitions, brownouts, shutdowns, clock steps and rate changes. Then
// everything heals, and one leader must emerge and stay.
func swarm(p *plan, r *rand.Rand) {
	leases := []time.Duration{time.Second, 2 * second, 5 * second, 10 * second, 30 * second}
	p.Nodes = p.Nodes[:0]
	same := leases[r.IntN(len(leases))]
	mixed := r.IntN(3) == 0
	for i := range 2 + r.IntN(6) {
		n := newNodeSpec(r, string(rune('a'+i)))
		n.Start = uniform(r, 0, 5*second)
		n.skew(uniform(r, -5*minute, 5*minute))
		n.Timing.LeaseDuration = same
		if mixed {
			n.Timing.LeaseDuration = leases[r.IntN(len(leases))]
		}
		p.Nodes = append(p.Nodes, n)
	}
	lo := uniform(r, 100*time.Microsecond, 5*time.Millisecond)
	p.Latency = latency{Min: lo, Max: uniform(r, lo, 100*time.Millisecond)}
	if r.IntN(2) == 0 {
		p.Latency.TailOneIn, p.Latency.TailMax = 5+r.IntN(200), uniform(r, p.Latency.Max, 5*second)
	}
	ppm := func(most int) int {
		if r.IntN(3) != 0 {
			return 0
		}
		return r.IntN(most + 1)
	}
	p.Faults = faults{
		ErrorPPM:         ppm(300_000),
		LostRenewPPM:     ppm(500_000),
		LostTakeoverPPM:  ppm(500_000),
		LostAsErrorPPM:   r.IntN(1_000_001),
		DelayPutPPM:      ppm(200_000),
		DelayMax:         uniform(r, second, 20*second),
		PlainConflictPPM: r.IntN(1_000_001),
	}
	if r.IntN(3) == 0 {
		p.Slow = &slow{OneIn: 1 + r.IntN(5), Cleanup: uniform(r, 0, 10*second), Demoted: uniform(r, 0, 5*second), Leader: uniform(r, 0, 5*second)}
	}
	pauses := r.IntN(3) == 0    // process pauses: zombies may overlap (I1)
	unbounded := r.IntN(8) == 0 // VM suspends and clocks beyond ρ (I1, I2)
	switch {
	case unbounded:
		p.Requires = All.Without(OneLeader, Tokens)
	case pauses:
		p.Requires = All.Without(OneLeader)
	}
	chaos := uniform(r, 2*minute, 6*minute)
	for t := uniform(r, 5*second, 20*second); t < chaos; t += uniform(r, second, 20*second) {
		swarmAction(p, r, t, pauses, unbounded)
	}
	healAt(p, chaos)
}

func swarmAction(p *plan, r *rand.Rand, t time.Duration, pauses, unbounded bool) {
	k := r.IntN(1 << 20)
	d := uniform(r, 100*time.Millisecond, 30*second)
	pick := func(w *world) *instance {
		live := w.liveInstances()
		if len(live) == 0 {
			return nil
		}
		return live[k%len(live)]
	}
	switch kind := r.IntN(10); {
	case kind == 0: // crash, and restart later
		newID := r.IntN(2) == 0
		p.at(t, func(w *world) {
			if in := pick(w); in != nil {
				w.crash(in)
				restartLater(w, in.node, d, newID)
			}
		})
	case kind == 1: // graceful shutdown, and restart later
		p.at(t, func(w *world) {
			if in := pick(w); in != nil {
				w.stop(in)
				restartLater(w, in.node, d+10*second, false)
			}
		})
	case kind == 2 && pauses:
		atCheck := r.IntN(2) == 0
		p.at(t, func(w *world) {
			in := pick(w)
			if l := w.leader(); atCheck && l != nil {
				w.arm(l, hookCheck, func() { w.pause(l, d, false) })
			} else if in != nil {
				w.pause(in, d, false)
			}
		})
	case kind == 3 && unbounded:
		p.at(t, func(w *world) {
			if in := pick(w); in != nil {
				w.pause(in, d+30*second, true)
			}
		})
	case kind == 4 && unbounded:
		ppb := int64(uniform(r, time.Duration(2*rhoPPB), time.Duration(20*rhoPPB)))
		if r.IntN(2) == 0 {
			ppb = -ppb
		}
		p.at(t, func(w *world) { w.rate(w.nodes[k%len(w.nodes)], ppb) })
	case kind == 4 || kind == 5: // rate change within ρ
		ppb := int64(uniform(r, -time.Duration(rhoPPB), time.Duration(rhoPPB)))
		p.at(t, func(w *world) { w.rate(w.nodes[k%len(w.nodes)], ppb) })
	case kind == 6: // wall step: tenure does not read the wall clock
		step := uniform(r, -10*minute, 10*minute)
		p.at(t, func(w *world) { w.stepWall(w.nodes[k%len(w.nodes)], step) })
	case kind == 7: // brownout
		errs := int(uniform(r, 0, 800_000))
		p.at(t, func(w *world) {
			if w.healed {
				return
			}
			w.fault("", "store brownout begins")
			w.store.lat = latency{Min: 50 * time.Millisecond, Max: second, TailOneIn: 4, TailMax: 6 * second}
			w.store.f.ErrorPPM = errs
		})
		p.at(t+d, func(w *world) { w.endBrownout() })
	default: // partition
		p.at(t, func(w *world) {
			n := w.nodes[k%len(w.nodes)]
			w.cutOff(n, true)
			w.at(w.now+d, nil, func() { w.cutOff(n, false) })
		})
	}
}

// mixedTTLs has the nodes ask for leases of 2s to 30s, in an order drawn
// at random, and crashes the leader about once a minute for 4 minutes.
func mixedTTLs(p *plan, r *rand.Rand) {
	ttls := []time.Duration{2 * second, 5 * second, 10 * second, 20 * second, 30 * second}
	r.Shuffle(len(ttls), func(i, j int) { ttls[i], ttls[j] = ttls[j], ttls[i] })
	for i, n := range p.Nodes {
		n.Timing.LeaseDuration = ttls[i]
	}
	for t := uniform(r, 40*second, 60*second); t < 4*minute; t += uniform(r, 50*second, 70*second) {
		crashLeader(p, t, 10*second, false)
	}
	p.Duration = 5 * minute
}
