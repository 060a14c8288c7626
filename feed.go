package tenure

import (
	"context"
	"errors"
	"log/slog"

	"github.com/tenure-go/tenure/lease"
)

// startFeed listens to the store's change feed for the lease, when the
// store has one (lease.Watcher): each write it tells of is a renewal
// notice (the Machine rate-limits them, and cold, gated or leading
// machines ignore them), and a release a wake-up (rate-limited apart), so
// that a follower reads a round trip after each renewal and after a
// release, without anyone's address. The first event, "listening", is
// dropped: the run reads as it starts. It returns the function that stops
// it; Run calls it before waiting for its goroutines.
func (r *runner) startFeed() (stop func()) {
	w, ok := r.c.cfg.Store.(lease.Watcher)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.runCtx))
	r.h.Go(func() {
		heard := feedHearer(func(ev lease.Event) {
			r.feedLive.Store(true)
			f := r.noticed(ev.Version)
			if ev.Released {
				f = r.feedReleased
			}
			if !r.h.Do(f) {
				cancel() // the run is over
			}
		})
		err := w.Watch(ctx, r.c.cfg.Lease, heard)
		r.feedLive.Store(false)
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			r.log(slog.LevelWarn, "no change feed from the store: following by polls", "err", err)
		}
	})
	return cancel
}

// feedReleased takes a release the feed tells of: a wake-up where the
// candidate takes them (a standby), else a read now within a wake-up's
// rate limit of its own (WakeBurst at once, then one every WakeEvery),
// not the notices': a read or two just spent on renewals must not hold a
// handoff back a poll.
func (r *runner) feedReleased() {
	switch {
	case r.readWoken():
	case r.feedWake.Allow(r.Now()):
		r.d.Hint()
	default:
		r.run.Noticed(lease.NoVersion) // a notice then, within the notices' rate limit
	}
}

// feedHearer returns a Watch's fn that passes on each event but the
// first, which says the feed listens: a read as one starts to wait finds
// what came before it.
func feedHearer(heard func(lease.Event)) func(lease.Event) {
	listening := false
	return func(ev lease.Event) {
		if !listening {
			listening = true
			if ev.Version == lease.NoVersion {
				return
			}
		}
		heard(ev)
	}
}

// feedNotices reports whether the leader's renewal notices would only
// repeat what the change feed tells the followers: once it works for this
// candidate, it works for the others on the same store.
func (r *runner) feedNotices() bool { return r.feedLive.Load() }
