package sim

import (
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// feed tells every live Candidate of a write of the lease, as a store's
// change feed does (lease.Watcher): an event per write, saying whether it
// released the lease, over the faults of Plan.Feed (lost, duplicated,
// delayed and so reordered), to a process that can reach the store. The
// Candidate reads on it as on a renewal notice, or on a release as on a
// wake-up; the writer hears its own, as it would.
func (w *world) feed(from *instance, ev lease.Event) {
	ff := w.plan.Feed
	for _, o := range w.liveInstances() {
		rt, ok := o.rt.(feedListener)
		if !ok {
			continue
		}
		w.chk.stats.FeedEvents++
		if w.now < w.feedSilentUntil {
			w.chk.stats.FeedLost++ // silent: lost to all, and nothing says so
			continue
		}
		delays := w.delays(ff)
		if delays == nil {
			w.chk.stats.FeedLost++
			w.trace(from, line{what: mFault, text: "feed event to " + o.label + " lost"})
			continue
		}
		for _, d := range delays {
			w.at(w.now+d, o, func() {
				if !o.node.cut { // cut off from the store, it hears nothing of it
					rt.heard(ev)
				}
			})
		}
	}
}

// feedListener is a Candidate's process on a store with a change feed.
type feedListener interface {
	heard(ev lease.Event) // an event of the feed
}

// heard takes an event of the feed as the Candidate's feed goroutine does:
// the glue's (engine.Candidate.FeedEvent).
func (f *fastRun) heard(ev lease.Event) {
	if f.dead || f.exited {
		return
	}
	f.trusted = f.w.opt.trustFeed
	f.c.FeedEvent(ev)
	f.loop()
}

// lastFeed reports whether the store's change feed, clean and not silent
// (feed-silent) now or at in's last write, tells a hot
// follower of in's last write as in stops: in's write is the record's,
// none of in's is still on its way, and a follower that reads at the hot
// cadence is live, running and reaches the store. Then the failover bound
// is the feed bound: see failoverBound.
func (w *world) lastFeed(in *instance) (time.Duration, bool) {
	ff := w.plan.Feed
	f, ok := in.rt.(*fastRun)
	if ff == nil || *ff != (wakeFaults{}) || w.now < w.feedSilentUntil || w.store.writtenAt < w.feedSilentUntil ||
		!ok || !w.store.exists || w.store.rec.Holder != in.ID ||
		f.eng.leaseCall() != nil && f.eng.leaseCall().kind == election.OpPut || in.lastArrival > w.now {
		return 0, false
	}
	for _, o := range w.liveInstances() {
		if g, ok := o.rt.(*fastRun); ok && o != in && !o.paused && !o.node.cut && !g.dead && !g.exited && (!g.hasSB || !g.cold) {
			return w.store.writtenAt, true
		}
	}
	return 0, false
}
