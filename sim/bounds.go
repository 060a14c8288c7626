package sim

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/election"
)

// The bounds the checker holds runs to (I5's failover, release and
// hand-off bounds; convergence), computed from the plan's timings, the
// store's latency and the nodes' clock rates.

// ppbOf converts a drift bound ρ to parts per billion.
func ppbOf(rho float64) int64 { return int64(rho*1e9 + 0.5) }

// trueSpan bounds the true time a clock running within ρ (in ppb) of true
// time takes to measure local: ⌈local/(1-ρ)⌉.
func trueSpan(local time.Duration, ppb int64) time.Duration {
	return time.Duration(mulDivFloor(int64(local), 1e9, 1e9-ppb)) + 1
}

// failoverBound is I5's bound after the leader in stops without releasing.
// With L the longest one-way delay: the leader's last write may still be on
// the wire at the crash (L); a follower's read that lands just before it is
// answered (L), the next read goes out a poll interval later and is answered
// (2L): that is when the follower first sees the write. It then waits
// ttl×(1+ρ) by its clock; a read may be in flight then (2L), and the
// takeover is one more round trip (2L). Hence ttl×(1+ρ)/(1-ρ) +
// poll/(1-ρ) + 4 round trips, in true time. Only scenarios whose latency is
// bounded by L expect it (Plan.Failover): a lost answer or a delayed write
// is latency without bound.
//
// A write of the leader's that lands later than L (a delayed write) counts
// as on the wire until it lands.
//
// With a standby (ColdPollInterval), the bound holds while a standby reads
// at the hot cadence. With none (it crashed, is paused, or has yet to be
// found), the cold followers find the last record within a cold poll and
// check it again one cold poll later: cold + wait + cold, and a read before
// the takeover (2L more).
func (w *world) failoverBound(in *instance) time.Duration {
	ttl := in.timing.LeaseDuration
	poll, rho := w.pollAndDrift(in)
	ppb := ppbOf(rho)
	l := w.store.lat.Bound()
	wire := max(in.lastArrival-w.now, l)
	wait := trueSpan(election.WaitBeforeTakeover(ttl, rho), ppb) + w.staleMax()
	if at, ok := w.lastFeed(in); ok {
		// The feed bound: the event leaves as the write lands, and the
		// rest is the notice bound's.
		w.chk.stats.FeedBounds++
		return at - w.now + 5*l + trueSpan(election.WaitBeforeTakeover(ttl, rho), ppb) + 4*l + time.Millisecond
	}
	if sent, ok := w.lastNotice(in); ok {
		// The notice bound: see noticeBound.
		w.chk.stats.NoticeBounds++
		return sent - w.now + 5*l + trueSpan(election.WaitBeforeTakeover(ttl, rho), ppb) + 4*l + time.Millisecond
	}
	if cold := w.coldPoll(in); cold > 0 && !w.hotStandbyBesides(in) {
		w.chk.stats.ColdBounds++
		return wire + trueSpan(cold, ppb) + wait + trueSpan(cold, ppb) + 9*l + time.Millisecond
	}
	return wire + wait + trueSpan(poll, ppb) + 7*l + time.Millisecond
}

// lastNotice reports whether the leader in, as it stops, has told the hot
// standby of its last write: a renewal notice sent (when, returned) after
// it, no write of in's still on its way, over a clean network. Then the
// failover bound is the notice bound, far tighter than a poll: the notice
// is on the wire (L), a read of the standby's may be in flight (2L), and
// the read it makes then is answered (2L). The standby has first seen the
// last write within 5L of the notice's send, which came before the stop.
// It waits ttl×(1+ρ) by its clock from then, reads if its last read is a
// poll old (2L), and takes over (2L). A notice is read strongly, so stale
// reads add nothing.
//
// Otherwise (the leader stopped with a write on its way, or before its
// notice went out; notices lost, delayed or forged), the standby finds the
// last write at its fallback poll, as without notices: the general bound.
func (w *world) lastNotice(in *instance) (time.Duration, bool) {
	wf := w.plan.Wake
	f, ok := in.rt.(*fastRun)
	if wf == nil || *wf != (wakeFaults{}) || !ok || f.noticeTo == "" || f.eng.leaseCall() != nil && f.eng.leaseCall().kind == election.OpPut || in.lastArrival > w.now {
		return 0, false
	}
	s := w.standby()
	if s == nil || s == in || s.ID != f.noticeTo || s.paused || s.node.cut || !w.hotStandbyBesides(in) {
		return 0, false
	}
	return f.noticeAt, true
}

// staleMax is how old a stale read may be. With stale polls, a follower
// may see the leader's last record as changed until that long after it
// landed, and a release only then: both bounds grow by it (and the
// release's by the strong read that confirms it).
func (w *world) staleMax() time.Duration {
	if !w.plan.StaleReads || w.store.f.StalePPM == 0 {
		return 0
	}
	return w.store.f.StaleMax
}

// coldPoll returns the longest cold poll of the live instances but in, or
// 0 without a standby.
func (w *world) coldPoll(in *instance) time.Duration {
	var c time.Duration
	for _, o := range w.liveInstances() {
		if o != in && o.timing.ColdPollInterval > 0 {
			c = max(c, election.MaxPoll(o.timing.ColdPollInterval))
		}
	}
	return c
}

// hotStandbyBesides reports whether a live instance other than in, not
// paused, is the standby.
func (w *world) hotStandbyBesides(in *instance) bool {
	for _, o := range w.liveInstances() {
		if f, ok := o.rt.(candidate); ok && o != in && !o.paused && f.hotStandby() {
			return true
		}
	}
	return false
}

// releaseBound is I5's bound after the leader in shuts down with nothing
// slow in its callbacks: its release lands (L), followers see it as above
// (a poll interval and 3L) and take over (a read in flight, then a round
// trip: 4L).
//
// With a standby but none reading at the hot cadence, the cold followers
// find the release within a cold poll. With wake-ups on a clean network
// and a standby, the standby is woken: see wakeBound.
func (w *world) releaseBound(in *instance) time.Duration {
	poll, rho := w.pollAndDrift(in)
	if cold := w.coldPoll(in); cold > 0 && !w.hotStandbyBesides(in) {
		poll = cold
	}
	extra := time.Duration(0)
	if s := w.staleMax(); s > 0 {
		extra = s + w.rtt()
	}
	return trueSpan(poll, ppbOf(rho)) + 4*w.rtt() + extra + time.Millisecond
}

// wakeBound is I5's bound after a release that wakes a standby, with no
// wake-up lost or delayed: the leader's release (a round trip, its read
// of the standby record running alongside), the wake-up (one way), a
// read in flight when it arrives and the read after it, and the takeover.
func (w *world) wakeBound() time.Duration {
	w.chk.stats.WakeBounds++
	return 4*w.rtt() + w.store.lat.Bound() + time.Millisecond
}

// lockHandoffBound is I5's bound from a wake-up that reaches a waiting
// lock while the lock is free, over a clean network: a read and a queue
// call in flight when it arrives; for a fair waiter not yet sure of its
// turn, the read of the slot ahead and the index's update; then the read
// it makes at once and the take.
func (w *world) lockHandoffBound() time.Duration {
	w.chk.stats.LockWakeBounds++
	return 6*w.rtt() + w.store.lat.Bound() + time.Millisecond
}

// handoffBound is releaseBound, or wakeBound where a standby reads and
// wake-ups cross a clean network, or a hot follower hears a clean change
// feed.
func (w *world) handoffBound(in *instance) time.Duration {
	if wf := w.plan.Wake; wf != nil && *wf == (wakeFaults{}) && w.hotStandbyBesides(in) {
		return w.wakeBound()
	}
	if ff := w.plan.Feed; ff != nil && *ff == (wakeFaults{}) {
		if _, ok := w.lastFeed(in); ok {
			// The release's event reaches a hot follower as the release
			// lands: as a wake-up would.
			return w.wakeBound()
		}
	}
	return w.releaseBound(in)
}

// standby returns the live instance that is the standby, or nil.
func (w *world) standby() *instance {
	for _, o := range w.liveInstances() {
		if f, ok := o.rt.(candidate); ok && f.hotStandby() {
			return o
		}
	}
	return nil
}

func (w *world) pollAndDrift(in *instance) (time.Duration, float64) {
	var poll time.Duration
	rho := in.timing.MaxDrift
	for _, o := range w.liveInstances() {
		if o != in {
			poll = max(poll, election.MaxPoll(o.timing.PollInterval))
			for _, ff := range []*wakeFaults{w.plan.Feed, w.plan.Wake} {
				if ff != nil {
					// A follower that times renewals from the feed, or
					// a standby from renewal notices, reads once it has
					// heard of none for a quarter poll more than the
					// longest poll (election.FeedSilence, stated here on
					// its own so that a longer one fails the bound),
					// after the last, which may have come DelayMax late.
					poll = max(poll, election.MaxPoll(o.timing.PollInterval)+o.timing.PollInterval/4+ff.DelayMax)
				}
			}
			rho = max(rho, o.timing.MaxDrift)
		}
	}
	return poll, rho
}

func (w *world) rtt() time.Duration { return 2 * w.store.lat.Bound() }

// convergeBound is I5's bound after heal: requests still on the wire land,
// calls in flight time out and back off, and then a failover completes.
// With slow callbacks, a candidate whose term ended does not campaign until
// its OnElected and OnDemoted returned (the callback contract); when every
// candidate is in that state (two nodes, both demoted at the heal), the
// first takeover waits for the quicker of them as well.
func (w *world) convergeBound() time.Duration {
	var ttl, op, retry, poll time.Duration
	rho := 0.0
	for _, in := range w.liveInstances() {
		ttl = max(ttl, in.timing.LeaseDuration)
		op = max(op, in.timing.OpTimeout)
		retry = max(retry, in.timing.RetryMax)
		poll = max(poll, election.MaxPoll(in.timing.PollInterval))
		rho = max(rho, in.timing.MaxDrift)
	}
	ppb := ppbOf(rho)
	wire := max(w.store.lastArrival-w.now, 0)
	var held time.Duration
	if s := w.plan.Slow; s != nil {
		held = trueSpan(s.Cleanup+s.Demoted, ppb)
	}
	return wire + 2*op + retry + held + trueSpan(election.WaitBeforeTakeover(ttl, rho), ppb) + trueSpan(poll, ppb) + 4*w.rtt()
}

// expectLeader registers an I5 check: some term must begin within d.
func (w *world) expectLeader(d time.Duration, why string) {
	from := w.now
	w.at(from+d, nil, func() { w.chk.leaderSince(from, d, why) })
}

// expectConverged registers I5's check after heal: within d one leader
// emerges, and it keeps leading, seen by all, until the shutdown.
func (w *world) expectConverged(d time.Duration) {
	w.chk.convPending = true
	w.at(w.now+d, nil, w.chk.converged)
}

func (n *node) clockString(now time.Duration) string {
	mono := n.clk.mono(now)
	return fmt.Sprintf("monotonic %+v, wall %+v, drift %+dppm", (mono - now).Round(time.Millisecond), (mono + n.clk.wall - now).Round(time.Millisecond), n.clk.ppb/1000)
}

// timing returns the timings of a process on the node, every default
// filled in and checked.
func (s *nodeSpec) timing() election.Timing {
	t := s.Timing.WithDefaults()
	if err := t.Validate(); err != nil {
		panic(fmt.Sprintf("sim: node %s: %v", s.Name, err)) // scenarios are fixed code
	}
	return t
}

func (s *nodeSpec) maxDrift() float64 { return s.Timing.WithDefaults().MaxDrift }

// The hold-offs of a process with timing t, as tenure.Config's defaults
// set them: Resign's (2 polls) and a hand-over's (the standby's lease).
func resignHoldOff(t election.Timing) time.Duration { return 2 * t.PollInterval }

func (s *nodeSpec) priorityHoldOff(t election.Timing) time.Duration {
	if s.PriorityHoldOff > 0 {
		return s.PriorityHoldOff
	}
	return election.StandbyTiming(t.WithStandby()).LeaseDuration // tenure.Config's default, with a standby or without
}
