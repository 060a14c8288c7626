package sim

import (
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/shell"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/lease"
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
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			crashLeaders(p, r, uniform(r, 40*second, 60*second))
		},
	},
	{
		Name:    "standby-crash",
		Summary: "the standby crashes, and the leader 0 to 40s later: a cold follower takes over within the cold bound, and another becomes the standby",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			t := uniform(r, 40*second, 60*second)
			for range 2 {
				atStandby(p, t, "crash", func(w *world, s *instance) {
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
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			t := uniform(r, 40*second, 60*second)
			for range 2 {
				d := uniform(r, 30*second, 90*second)
				atStandby(p, t, "pause", func(w *world, s *instance) { w.pause(s, d, false) })
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
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{}
			releaseLeader(p, r, 5)
		},
	},
	{
		Name:    "wake-faults",
		Summary: "wake-ups lost (up to half), duplicated and delayed up to 5s: every handoff still within the release bound",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{LossPPM: r.IntN(500_000), DupPPM: 300_000, DelayPPM: 300_000, DelayMax: 5 * second}
			releaseLeader(p, r, 5)
		},
	},
	{
		Name:    "notice-crash",
		Summary: "the leader sends the standby a notice after each renewal; it crashes four times, half of them with a renewal on its way: the standby takes over within the notice bound, or the general one",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{}
			t := uniform(r, 40*second, 60*second)
			for i := range 4 {
				if i%2 == 0 {
					crashLeader(p, t, uniform(r, 10*second, 40*second), false)
				} else {
					crashOnRenewal(p, t)
				}
				t += uniform(r, 60*second, 90*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "notice-faults",
		Summary: "notices and wake-ups lost (up to half), duplicated, delayed up to 5s, and forged in bursts of up to 20; leaders crash and shut down: every failover within the general bound, and forged notices read no more often than the fastest poll",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = forgingWake(r)
			crashesAndStops(p, r)
			forgeNotices(p, r)
		},
	},
	{
		Name:    "notice-zombie",
		Summary: "with notices, the leader pauses past its lease or is cut off from the store, and comes back a zombie: the standby takes over within the notice bound, and the zombie's term has ended",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{}
			zombieLeaders(p, r)
		},
	},
}

// withStandby turns the standby on for every node: cold polls of 20s.
func withStandby(p *plan) {
	for _, n := range p.Nodes {
		n.Timing.ColdPollInterval = 20 * second
	}
}

// releaseLeader shuts the leader down n times, 50 to 70s apart, and
// restarts it 5 to 15s later. A handoff is expected within the wake-up
// bound where a standby reads and wake-ups cross a clean network, and
// within the release bound otherwise (world.handoffBound).
func releaseLeader(p *plan, r *rand.Rand, n int) {
	t := uniform(r, 40*second, 60*second)
	for range n {
		stopLeader(p, t, uniform(r, 5*second, 15*second))
		t += uniform(r, 50*second, 70*second)
	}
	p.Duration = t
}

// atStandby does f to the standby at t, if there is one.
func atStandby(p *plan, t time.Duration, what string, f func(w *world, s *instance)) {
	p.at(t, func(w *world) {
		if s := w.standby(); s != nil {
			f(w, s)
			return
		}
		w.fault("", "no standby to %s", what)
	})
}

// staleScenarios: followers poll with reads a stale answer may serve.
var staleScenarios = []*Scenario{
	{
		Name:    "stale-reads",
		Summary: "30 to 70% of followers' polls return the record as it was up to 0.5 to 3s before; leaders crash and shut down",
		build: func(p *plan, r *rand.Rand) {
			p.StaleReads = true
			p.Faults.StalePPM = 300_000 + r.IntN(400_000)
			p.Faults.StaleMax = uniform(r, 500*time.Millisecond, 3*second)
			t := uniform(r, 30*second, 60*second)
			for i := range 4 {
				if i%2 == 0 {
					crashLeader(p, t, uniform(r, 10*second, 40*second), false)
				} else {
					stopLeader(p, t, uniform(r, 5*second, 15*second))
				}
				t += uniform(r, 50*second, 80*second)
			}
			p.Duration = t
		},
	},
}

// crashOnRenewal crashes whoever leads at t as it next sends a renewal,
// which is then on its way, and restarts it 20s later.
func crashOnRenewal(p *plan, t time.Duration) {
	p.atLeader(t, "crash", func(w *world, l *instance) {
		w.arm(l, hookRenewalSent, func() {
			w.crash(l)
			w.expectLeader(w.failoverBound(l), "crash of "+l.label+" with a renewal on its way")
			restartLater(w, l.node, 20*second, false)
		})
	})
}

// crashesAndStops crashes the leader and shuts it down in turn, four times
// from 40-60s on, 60 to 90s apart.
func crashesAndStops(p *plan, r *rand.Rand) { crashesAndStopsAfter(p, r, nil) }

// crashesAndStopsAfter is crashesAndStops with before, if not nil, called
// with each crash's or shutdown's instant before it is planned.
func crashesAndStopsAfter(p *plan, r *rand.Rand, before func(t time.Duration)) {
	t := uniform(r, 40*second, 60*second)
	for i := range 4 {
		if before != nil {
			before(t)
		}
		if i%2 == 0 {
			crashLeader(p, t, uniform(r, 10*second, 40*second), false)
		} else {
			stopLeader(p, t, uniform(r, 5*second, 15*second))
		}
		t += uniform(r, 60*second, 90*second)
	}
	p.Duration = t
}

// zombieLeaders pauses the leader past its lease or cuts it off from the
// store, in turn, four times, for 15 to 40s: it comes back a zombie. A
// paused leader acts until it checks, so I1 is not promised.
func zombieLeaders(p *plan, r *rand.Rand) {
	p.Requires = All.Without(OneLeader) // a paused leader acts until it checks: fencing (I3) protects
	t := uniform(r, 40*second, 60*second)
	for i := range 4 {
		d := uniform(r, 15*second, 40*second)
		p.atLeader(t, "pause or cut off", func(w *world, l *instance) {
			if i%2 == 0 {
				w.pause(l, d, false)
				w.expectLeader(w.failoverBound(l), "pause of "+l.label)
				return
			}
			cutOffFor(w, l, d)
		})
		t += d + uniform(r, 60*second, 90*second)
	}
	p.Duration = t
}

// forgingWake is a wake-up network that loses up to half, duplicates and
// delays 30% (by up to 5s), and carries forged bursts of up to 20 (with
// forgeNotices).
func forgingWake(r *rand.Rand) *wakeFaults {
	return &wakeFaults{LossPPM: r.IntN(500_000), DupPPM: 300_000, DelayPPM: 300_000, DelayMax: 5 * second,
		ForgeEvery: uniform(r, 500*time.Millisecond, 5*second), ForgeBurst: 1 + r.IntN(20)}
}

// forgeNotices has forged renewal notices (Plan.Wake's ForgeBurst at
// once) reach a live instance at random, one burst every ForgeEvery on
// average, from the start to the end of the plan.
func forgeNotices(p *plan, r *rand.Rand) { forge(p, r, p.Wake) }

// forge has forged renewal notices, or feed events where wf is
// Plan.Feed, come as wf says.
func forge(p *plan, r *rand.Rand, wf *wakeFaults) {
	for t := uniform(r, 0, 2*wf.ForgeEvery); t < p.Duration; t += uniform(r, 0, 2*wf.ForgeEvery) {
		p.at(t, func(w *world) {
			live := w.liveInstances()
			if len(live) == 0 {
				return
			}
			in := live[w.rng.IntN(len(live))]
			if fl, ok := in.rt.(feedListener); ok && wf == w.plan.Feed {
				w.trace(in, line{what: mFault, text: "forged feed events"})
				// Half name the version the store holds: they must not
				// hold back a follower's polls either. Most carry a
				// record: the one the store holds, under the version it
				// holds, or with its lease duration halved or doubled
				// (one no follower has read: never timed, only read).
				// Renewals forged under versions never written, or long
				// gone, are feed-forged's: they delay takeovers.
				ev := lease.Event{Version: "forged"}
				if w.rng.IntN(2) == 0 {
					ev.Version = w.store.ver
				}
				if w.store.exists && w.rng.IntN(4) != 0 {
					rec := w.store.rec.Clone()
					switch w.rng.IntN(3) {
					case 0:
						ev.Version = w.store.ver
					case 1:
						rec.Duration /= 2
					case 2:
						rec.Duration *= 2
					}
					if w.plan.ForgeRenewals && w.rng.IntN(2) == 0 {
						// A version written before, or one never to be:
						// a feed tells only of writes made (lease.Watcher),
						// so none names a version ahead of the store's.
						ev.Version = lease.Version("v" + strconv.Itoa(1+w.rng.IntN(w.store.verN)))
						if w.rng.IntN(2) == 0 {
							ev.Version = lease.Version("forged-" + strconv.Itoa(w.rng.IntN(1000)))
						}
						rec.Duration = w.store.rec.Duration
					}
					ev.Record = &rec
				}
				for range wf.ForgeBurst {
					w.chk.stats.NoticesForged++
					fl.heard(ev)
				}
				return
			}
			// Half the forged notices tell a renewal: the term the store
			// holds, under the version it holds (a notice late or
			// repeated), or with its lease duration doubled (one no
			// standby has read). Both tiers draw alike.
			forged := func() string {
				msg := shell.NoticeMsg(leaseName)
				if w.store.exists && w.rng.IntN(2) == 0 {
					r := engine.Renewal{Version: w.store.ver, Holder: w.store.rec.Holder, Token: w.store.rec.Token, Duration: w.store.rec.Duration}
					if w.rng.IntN(2) == 0 {
						r.Duration *= 2
					}
					msg = shell.RenewalMsg(leaseName, r)
				}
				return msg
			}
			switch rt := in.rt.(type) {
			case *fastRun:
				w.trace(in, line{what: mFault, text: "forged renewal notices"})
				msg := forged()
				for range wf.ForgeBurst {
					w.chk.stats.NoticesForged++
					rt.noticedMsg(msg)
				}
			case *lockClient: // no notices: forged wake-ups for its lock
				w.trace(in, line{what: mFault, text: "forged wake-ups"})
				for range wf.ForgeBurst {
					w.chk.stats.NoticesForged++
					rt.woken(rt.name)
				}
			case lockProc: // the same on the real tier
				w.trace(in, line{what: mFault, text: "forged wake-ups"})
				for range wf.ForgeBurst {
					w.chk.stats.NoticesForged++
					rt.(hearer).hear(wakePrefix + rt.client().name)
				}
			case hearer:
				w.trace(in, line{what: mFault, text: "forged renewal notices"})
				msg := forged()
				for range wf.ForgeBurst {
					w.chk.stats.NoticesForged++
					rt.hear(msg)
				}
			}
		})
	}
}
