package sim

import (
	"math/rand/v2"
	"time"
)

var quickLatency = latency{Min: 500 * time.Microsecond, Max: 10 * time.Millisecond}

// feedScenarios run on a store with a change feed (Plan.Feed, as
// lease.Watcher): every write of the lease reaches every Candidate, which
// reads on it as on a renewal notice, with no wake-up address anywhere.
// With a clean feed a crash is held to the feed bound (world.lastFeed),
// L×(1+ρ) and a few round trips from the leader's last write; with a
// faulty one, to the general bounds: an event only ever moves a read.
//
// Their store answers within 10ms, without the healthy store's tail, so
// that the feed bound (9 one-way delays beyond the wait) is far below a
// poll: a follower that read on its polls and not on the events would
// break it.
var feedScenarios = []*Scenario{
	{
		Name:    "feed-crash",
		Summary: "a change feed, no standby: the leader crashes four times, half of them with a renewal on its way, and shuts down four times, two of them early in a term: a new leader within the feed bound, or the general one, and a handoff within a few round trips",
		build: func(p *plan, r *rand.Rand) {
			p.Feed = &wakeFaults{}
			p.Latency = quickLatency // so that the bound is tight: a read a poll late breaks it
			t := uniform(r, 30*second, 50*second)
			for i := range 6 {
				switch {
				case i%3 == 2:
					stopLeader(p, t, uniform(r, 5*second, 15*second))
				case i%3 == 0:
					crashLeader(p, t, uniform(r, 10*second, 40*second), false)
					// The new leader shuts down early in its term, while
					// its followers' reads are fresh: its release must not
					// wait on their notices' rate limit.
					stopLeader(p, t+uniform(r, 11*second, 13*second), uniform(r, 5*second, 15*second))
				default:
					crashOnRenewal(p, t)
				}
				t += uniform(r, 50*second, 70*second)
			}
			p.Duration = t
		},
	},
	{
		Name:    "feed-faults",
		Summary: "a change feed that loses up to half its events, repeats, delays (up to 5s, so reorders) and forges them in bursts of up to 20, beside a standby; leaders crash and shut down: every failover within the general bound, and the standby reads no more often than its fastest poll",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Feed = forgingWake(r)
			crashesAndStops(p, r)
			forge(p, r, p.Feed)
		},
	},
	{
		Name:    "feed-forged",
		Summary: "a change feed that loses, repeats and delays events and forges renewals of the term the store holds under versions never written or long gone, beside crashes and shutdowns: followers time what they are told, so forged renewals delay takeovers (no failover bound), and never hasten one",
		build: func(p *plan, r *rand.Rand) {
			p.Feed = forgingWake(r)
			p.ForgeRenewals = true
			p.Failover = false // a forged renewal restarts a wait: a delay, promised as nothing more
			crashesAndStops(p, r)
			forge(p, r, p.Feed)
		},
	},
	{
		Name:    "feed-silent",
		Summary: "a change feed that goes silent for 10 to 40s at a time (a watch that stopped without breaking) while leaders crash and shut down: followers read once it has been silent for FeedSilence, and a new leader comes within the general bound",
		build: func(p *plan, r *rand.Rand) {
			p.Feed = &wakeFaults{}
			crashesAndStopsAfter(p, r, func(t time.Duration) {
				// Silent from a little before the leader goes, for 10 to
				// 40s: its last renewals, or its release, told to nobody.
				silent, d := t-uniform(r, 0, 8*second), uniform(r, 10*second, 40*second)
				p.at(silent, func(w *world) {
					w.feedSilentUntil = w.now + d
					w.trace(nil, line{what: mFault, text: "the feed goes silent for " + d.String()})
				})
			})
		},
	},
	{
		Name:    "feed-mixed-ttl",
		Summary: "a change feed that loses and delays events; nodes ask for leases of 2s to 30s and leaders crash: a follower times a renewal only of the term it read, with that term's lease duration, so it waits out each holder's own",
		build: func(p *plan, r *rand.Rand) {
			p.Feed = &wakeFaults{LossPPM: 200_000, DelayPPM: 200_000, DelayMax: 2 * second}
			mixedTTLs(p, r)
		},
	},
	{
		Name:    "feed-zombie",
		Summary: "a change feed, no standby: the leader pauses past its lease or is cut off from the store, and comes back a zombie: a follower takes over within the feed bound, and the zombie's term has ended",
		build: func(p *plan, r *rand.Rand) {
			p.Feed = &wakeFaults{}
			p.Latency = quickLatency // so that the bound is tight: a read a poll late breaks it
			zombieLeaders(p, r)
		},
	},
}
