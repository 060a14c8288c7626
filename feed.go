package tenure

import (
	"context"
	"errors"
	"log/slog"

	"github.com/tenure-go/tenure/lease"
)

// startFeed listens to the store's change feed for the lease, when the
// store has one (lease.Watcher), and passes its events to the glue
// (engine.Candidate.FeedEvent), so that a follower reads a round trip after
// each renewal and after a release, without anyone's address. It returns
// the function that stops it; Run calls it before waiting for its
// goroutines.
func (r *runner) startFeed() (stop func()) {
	w, ok := r.c.cfg.Store.(lease.Watcher)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.runCtx))
	r.h.Go(func() {
		err := w.Watch(ctx, r.c.cfg.Lease, func(ev lease.Event) {
			if !r.h.Do(func() { r.g.FeedEvent(ev) }) {
				cancel() // the run is over
			}
		})
		r.g.FeedDown()
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			r.log(slog.LevelWarn, "no change feed from the store: following by polls", "err", err)
		}
	})
	return cancel
}
