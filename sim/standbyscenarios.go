package sim

import (
	"math/rand/v2"
	"time"
)

// standbyScenarios run Candidates with a standby (Config.Standby): one
// follower reads the lease every PollInterval, the others every
// ColdPollInterval (20s here, ten polls), and a leader that releases may
// wake the standby. I5's bounds account for it: the hot bound while a
// standby reads, the cold one when none does (world.failoverBound).
var standbyScenarios = []*Scenario{
	{
		Name:    "standby-leader-crash",
		Summary: "with a standby: the leader crashes three times; the standby takes over within the failover bound",
		standby: true,
		build: func(p *Plan, r *rand.Rand) {
			withStandby(p)
			t := uniform(r, 40*second, 60*second)
			for range 3 {
				crashLeader(p, t, uniform(r, 10*second, 40*second), r.IntN(2) == 0)
				t += uniform(r, 60*second, 90*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "standby-crash",
		Summary: "the standby crashes, and the leader 0 to 40s later: a cold follower takes over within the cold bound, and another becomes the standby",
		standby: true,
		build: func(p *Plan, r *rand.Rand) {
			withStandby(p)
			t := uniform(r, 40*second, 60*second)
			for range 2 {
				p.at(t, func(w *world) {
					s := w.standby()
					if s == nil {
						w.fault("", "no standby to crash")
						return
					}
					w.crash(s)
					restartLater(w, s.node, uniform(w.rng, 30*second, 60*second), false)
				})
				crashLeader(p, t+uniform(r, 0, 40*second), uniform(r, 10*second, 40*second), false)
				t += uniform(r, 100*second, 120*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "standby-pause",
		Summary: "the standby pauses 30 to 90s, past its record's lease, and the leader crashes meanwhile: cold followers take over; the resumed standby steps aside",
		standby: true,
		build: func(p *Plan, r *rand.Rand) {
			withStandby(p)
			t := uniform(r, 40*second, 60*second)
			for range 2 {
				d := uniform(r, 30*second, 90*second)
				p.at(t, func(w *world) {
					s := w.standby()
					if s == nil {
						w.fault("", "no standby to pause")
						return
					}
					w.pause(s, d, false)
				})
				crashLeader(p, t+uniform(r, second, d-5*second), uniform(r, 10*second, 40*second), false)
				t += d + uniform(r, 60*second, 90*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "wake-handoff",
		Summary: "a leader that shuts down wakes the standby, which takes over within a few round trips, five times",
		standby: true,
		build: func(p *Plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &WakeFaults{}
			releaseLeader(p, r, 5)
		},
	},
	{
		Name:    "wake-faults",
		Summary: "wake-ups lost (up to half), duplicated and delayed up to 5s: every handoff still within the release bound",
		standby: true,
		build: func(p *Plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &WakeFaults{LossPPM: r.IntN(500_000), DupPPM: 300_000, DelayPPM: 300_000, DelayMax: 5 * second}
			releaseLeader(p, r, 5)
		},
	},
}

// withStandby turns the standby on for every node: cold polls of 20s.
func withStandby(p *Plan) {
	for _, n := range p.Nodes {
		n.Timing.ColdPollInterval = 20 * second
	}
}

// releaseLeader shuts the leader down n times, 50 to 70s apart, and
// restarts it 5 to 15s later. A handoff is expected within the wake-up
// bound where a standby reads and wake-ups cross a clean network, and
// within the release bound otherwise.
func releaseLeader(p *Plan, r *rand.Rand, n int) {
	t := uniform(r, 40*second, 60*second)
	for range n {
		back := uniform(r, 5*second, 15*second)
		p.at(t, func(w *world) {
			l := w.leader()
			if l == nil {
				w.fault("", "no leader to stop")
				return
			}
			bound := w.releaseBound(l)
			if wf := w.plan.Wake; *wf == (WakeFaults{}) && w.hotStandbyBesides(l) {
				bound = w.wakeBound()
			}
			w.stop(l)
			w.expectLeader(bound, "release by "+l.label)
			restartLater(w, l.node, back, false)
		})
		t += uniform(r, 50*second, 70*second)
	}
	p.Duration = t
}

// staleScenarios: followers poll with reads a stale answer may serve.
var staleScenarios = []*Scenario{
	{
		Name:    "stale-reads",
		Summary: "30 to 70% of followers' polls return the record as it was up to 0.5 to 3s before; leaders crash and shut down",
		build: func(p *Plan, r *rand.Rand) {
			p.StaleReads = true
			p.Faults.StalePPM = 300_000 + r.IntN(400_000)
			p.Faults.StaleMax = uniform(r, 500*time.Millisecond, 3*second)
			t := uniform(r, 30*second, 60*second)
			for i := range 4 {
				if i%2 == 0 {
					crashLeader(p, t, uniform(r, 10*second, 40*second), false)
				} else {
					p.at(t, func(w *world) {
						l := w.leader()
						if l == nil {
							w.fault("", "no leader to stop")
							return
						}
						w.stop(l)
						w.expectLeader(w.releaseBound(l), "release by "+l.label)
						restartLater(w, l.node, uniform(w.rng, 5*second, 15*second), false)
					})
				}
				t += uniform(r, 50*second, 80*second)
			}
			p.Duration = t
		},
	},
}
