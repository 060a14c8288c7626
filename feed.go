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
// machines ignore them), so that a follower reads a round trip after each
// renewal and after a release, without anyone's address. It returns the
// function that stops it; Run calls it before waiting for its goroutines.
func (r *runner) startFeed() (stop func()) {
	w, ok := r.c.cfg.Store.(lease.Watcher)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.runCtx))
	r.h.Go(func() {
		err := w.Watch(ctx, r.c.cfg.Lease, func(lease.Event) {
			r.feedLive.Store(true)
			if !r.h.Do(r.noticed) {
				cancel() // the run is over
			}
		})
		r.feedLive.Store(false)
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			r.log(slog.LevelWarn, "no change feed from the store: following by polls", "err", err)
		}
	})
	return cancel
}

// feedNotices reports whether the leader's renewal notices would only
// repeat what the change feed tells the followers: once it works for this
// candidate, it works for the others on the same store.
func (r *runner) feedNotices() bool { return r.feedLive.Load() }
