package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tenure-go/tenure/election"
)

// preferScenarios run Candidates with priorities (Config.Priority) over a
// standby: candidates join, flap, crash, pause and are cut off, and I8
// checks every hand-over and, once the candidates are left alone, that
// one of the highest priority leads.
var preferScenarios = []*Scenario{
	{
		Name:    "prefer-rolling",
		Summary: "a rolling deploy restarts every node with a higher priority (the new version), then two with a higher one still: a node of the newest version leads within the preference bound, each hand-over a hold-off into its term",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{}
			t := uniform(r, 30*second, 50*second)
			t = rollOut(p, r, t, p.Nodes, 1)
			order := r.Perm(len(p.Nodes))
			t = rollOut(p, r, t, []*nodeSpec{p.Nodes[order[0]], p.Nodes[order[1]]}, 2)
			expectPreferredAt(p, t)
		},
	},
	{
		Name:    "prefer-flap",
		Summary: "the node of highest priority crashes 10 to 50s after each start, six times, often while it leads, and comes back 5 to 30s later: it takes the lease at most once a hold-off, and leads within the preference bound once it stays up",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{}
			pref := p.Nodes[r.IntN(len(p.Nodes))]
			pref.Priority = 10
			t := time.Duration(0)
			for range 6 {
				t += uniform(r, 10*second, 50*second)
				p.at(t, func(w *world) {
					n := w.nodeOf(pref)
					in := n.cur
					if in == nil || !in.live() {
						return
					}
					if w.chk.open[in] != nil {
						w.crash(in)
						w.expectLeader(w.failoverBound(in), "crash of "+in.label)
					} else {
						w.crash(in)
					}
					restartLater(w, n, uniform(w.rng, 5*second, 30*second), w.rng.IntN(2) == 0)
				})
				t += 30 * second // its restart, at the latest
			}
			expectPreferredAt(p, t)
		},
	},
	{
		Name:    "prefer-faults",
		Summary: "priorities drawn at random, with ties; leaders crash, the preferred standby crashes at the moment it is handed the lease, nodes pause and are cut off, clocks skewed, wake-ups lost: every hand-over is followed by a leader within the hand-over bound, and the highest priority leads once the faults stop",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			withStandby(p)
			p.Wake = &wakeFaults{LossPPM: r.IntN(500_000), DupPPM: 200_000, DelayPPM: 200_000, DelayMax: 2 * second}
			for i, k := range r.Perm(len(p.Nodes)) {
				n := p.Nodes[i]
				n.Priority = k % 3 // ties, and one of the top
				n.skew(uniform(r, -30*second, 30*second))
			}
			p.at(0, func(w *world) {
				w.onHandOver = func(*instance) {
					if s := w.standby(); s != nil && w.rng.IntN(3) == 0 {
						w.crash(s)
						restartLater(w, s.node, uniform(w.rng, 5*second, 20*second), false)
					}
				}
			})
			t := uniform(r, 60*second, 90*second)
			for i := range 6 {
				switch i % 3 {
				case 0:
					crashLeader(p, t, uniform(r, 10*second, 40*second), r.IntN(2) == 0)
				case 1:
					p.at(t, func(w *world) { // the standby, or else a follower
						s := w.standby()
						if s == nil {
							s = w.follower()
						}
						if s == nil {
							w.fault("", "no follower to cut off")
							return
						}
						n := s.node
						w.cutOff(n, true)
						w.at(w.now+uniform(w.rng, 10*second, 40*second), nil, func() { w.cutOff(n, false) })
					})
				case 2:
					p.atLeader(t, "pause", func(w *world, l *instance) {
						d := uniform(w.rng, 15*second, 40*second) // past its lease
						w.pause(l, d, false)
						w.expectLeader(w.failoverBound(l), "pause of "+l.label)
					})
				}
				t += uniform(r, 60*second, 100*second)
			}
			p.Requires = All.Without(OneLeader) // a paused leader acts until it checks: fencing (I3) protects
			p.at(t, func(w *world) { w.onHandOver = nil })
			expectPreferredAt(p, t+60*second) // the restarts and reconnections are over
		},
	},
	{
		Name:    "prefer-defaults",
		Summary: "a node of priority 10 (with its standby) joins nodes that run the defaults (no standby, no priority), and later crashes and comes back: a leader with the defaults hands it the lease, a hold-off into its term, and it leads within the preference bound",
		standby: true,
		build: func(p *plan, r *rand.Rand) {
			p.Wake = &wakeFaults{} // a priority listens for wake-ups by default
			pref := p.Nodes[r.IntN(len(p.Nodes))]
			pref.Timing.ColdPollInterval = 20 * second // Config.Priority turns its standby on; the others have none
			pref.Priority = 10
			pref.Start = uniform(r, 20*second, 40*second)
			t := pref.Start + uniform(r, 90*second, 150*second)
			p.at(t, func(w *world) {
				n := w.nodeOf(pref)
				in := n.cur
				if in == nil || !in.live() {
					return
				}
				leading := w.chk.open[in] != nil
				w.crash(in)
				if leading {
					w.expectLeader(w.failoverBound(in), "crash of "+in.label)
				}
				restartLater(w, n, uniform(w.rng, 5*second, 20*second), w.rng.IntN(2) == 0)
			})
			expectPreferredAt(p, t+30*second) // its restart is over
		},
	},
}

// rollOut restarts the nodes one at a time, from t, 40 to 70s apart, each
// with the given priority (a new version): a graceful stop, and the new
// process 5 to 15s later. It returns when the last one is up.
func rollOut(p *plan, r *rand.Rand, t time.Duration, nodes []*nodeSpec, priority int) time.Duration {
	for _, spec := range nodes {
		back := uniform(r, 5*second, 15*second)
		p.at(t, func(w *world) {
			n := w.nodeOf(spec)
			if in := n.cur; in != nil && in.live() {
				if w.chk.open[in] != nil {
					w.expectLeader(w.handoffBound(in), "release by "+in.label)
				}
				w.stop(in)
			}
			w.at(w.now+back, nil, func() {
				spec.Priority = priority
				if n.cur == nil || !n.cur.live() {
					w.restart(n, false)
				}
			})
		})
		t += uniform(r, 40*second, 70*second)
	}
	return t
}

// expectPreferredAt checks, the preference bound after t, that one of the
// highest priority leads; the run lasts a minute longer.
func expectPreferredAt(p *plan, t time.Duration) {
	p.at(t, func(w *world) { w.expectPreferred() })
	p.Duration = t + 6*minute // above any preference bound of these timings
}

// follower returns a live instance that does not lead, at random, or nil.
func (w *world) follower() *instance {
	var fs []*instance
	for _, in := range w.liveInstances() {
		if w.chk.open[in] == nil {
			fs = append(fs, in)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return fs[w.rng.IntN(len(fs))]
}

// nodeOf returns the node of spec.
func (w *world) nodeOf(spec *nodeSpec) *node {
	for _, n := range w.nodes {
		if n.spec == spec {
			return n
		}
	}
	panic("sim: no node for " + spec.Name)
}

// handingOver is I8's check as the leader l hands the lease over: its term
// is at least its PriorityHoldOff old, by its clock; the standby's record
// was written within the leader's last cold poll (seen alive); and unless
// something is crashed, stopped, paused or cut off meanwhile, a term
// begins within the hand-over bound.
func (w *world) handingOver(l *instance) {
	w.chk.stats.Handovers++
	hold := l.node.spec.priorityHoldOff(l.timing)
	if t := w.chk.open[l]; t != nil {
		if age := w.now - t.start; age < hold-election.Drift(hold, l.timing.MaxDrift) {
			w.chk.violate(Preference, l, fmt.Sprintf("%s hands over term %d %v into it, before its hold-off of %v", l.label, t.tok, age, hold))
		}
	}
	// Only to a standby seen alive: its record written since the leader's
	// read before this one, a cold poll earlier.
	if sb, c := w.store.sb, l.timing.WithStandby().ColdPollInterval; w.now-sb.written > trueSpan(c, ppbOf(l.timing.MaxDrift))+2*w.rtt() {
		w.chk.violate(Preference, l, fmt.Sprintf("%s hands over to %s, whose standby record is %v old: not seen alive", l.label, sb.rec.Holder, w.now-sb.written))
	}
	from, bound := w.now, w.handOverBound(l)
	w.at(from+bound, nil, func() {
		// Excused by a fault after the hand-over began, but not by one at
		// its instant (onHandOver's): a dead standby must not be waited on.
		if w.upset > from || w.disturbed() {
			return
		}
		for _, t := range w.chk.terms {
			if t.start >= from && t.start <= from+bound {
				return
			}
		}
		w.chk.violate(Preference, l, fmt.Sprintf("no leader within %v of the hand-over by %s at %s", bound, l.label, fmtTime(from)))
	})
	if w.onHandOver != nil {
		w.onHandOver(l)
	}
}

// disturbed reports whether a live instance is paused or cut off now.
func (w *world) disturbed() bool {
	for _, in := range w.liveInstances() {
		if in.paused || in.node.cut {
			return true
		}
	}
	return false
}

// handOverBound bounds the time from a hand-over by l to the next term:
// its callbacks are quick and its release one round trip; a live standby
// takes the lease at its wake-up or its next hot poll, and should it be
// dead, l takes the lease back at the end of its Resign hold-off (a read
// and a write). The release bound covers the first, with the hold-off the
// second.
func (w *world) handOverBound(l *instance) time.Duration {
	return trueSpan(resignHoldOff(l.timing), ppbOf(l.timing.MaxDrift)) + w.releaseBound(l)
}

// preferBound bounds the time from when the candidates are left alone to
// when one of the highest priority leads: a cold failover (the lease may
// be free or expiring), its standby record taken (at its next cold poll,
// or once a dead process's record under its ID expired), the leader's
// hold-off, two of its reads of the record (one may find no renewal), and
// the hand-over.
func (w *world) preferBound() time.Duration {
	var bound time.Duration
	for _, in := range w.liveInstances() {
		t := in.timing
		ppb := ppbOf(t.MaxDrift)
		cold := election.MaxPoll(t.WithStandby().ColdPollInterval)
		sb := election.StandbyTiming(t.WithStandby())
		b := trueSpan(election.WaitBeforeTakeover(t.LeaseDuration, t.MaxDrift)+cold, ppb) +
			trueSpan(election.WaitBeforeTakeover(sb.LeaseDuration, t.MaxDrift)+cold, ppb) +
			trueSpan(in.node.spec.priorityHoldOff(t)+3*cold, ppb) +
			w.handOverBound(in) + 10*w.rtt()
		bound = max(bound, b)
	}
	return bound
}

// expectPreferred is I8's check that, the preference bound from now, with
// nothing crashed, stopped, paused or cut off meanwhile, one of the
// highest priority among the live candidates leads.
func (w *world) expectPreferred() {
	from, bound := w.now, w.preferBound()
	w.chk.stats.PreferredChecks++
	w.at(from+bound, nil, func() {
		if w.upset >= from || w.disturbed() {
			w.chk.violate(Preference, nil, "the scenario disturbs the candidates during the preference check")
			return
		}
		top, l := 0, w.leader()
		for i, in := range w.liveInstances() {
			if p := in.rt.(candidate).prio(); i == 0 || p > top {
				top = p
			}
		}
		switch {
		case l == nil:
			w.chk.violate(Preference, nil, fmt.Sprintf("no leader %v after %s", bound, fmtTime(from)))
		case l.rt.(candidate).prio() < top:
			w.chk.violate(Preference, l, fmt.Sprintf("%s (priority %d) leads %v after %s, while a candidate of priority %d is live", l.label, l.rt.(candidate).prio(), bound, fmtTime(from), top))
		}
	})
}
