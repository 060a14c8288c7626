package tenure

import (
	"context"
	"log/slog"

	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/lease"
)

// syncFeed listens, on a store with a change feed (lease.Watcher), for
// the writes of each shard the member waits for (groupcore.Campaign's
// Waiting), and stops listening to the others: an event makes the
// shard's lock read at once, so that a shard handed over reaches its next
// owner a round trip after its release, without a wake-up address. (A
// shard a leaving member gives back is not waited for until its next
// owner's beat shows the leave: it goes over then.) Run on the loop after
// every event.
func (g *Group) syncFeed() {
	w, ok := g.cfg.Store.(lease.Watcher)
	if !ok {
		return
	}
	c := g.e.c
	for i := range g.cfg.Shards {
		stop, on := g.feeds[i]
		switch want := c.Waiting(i); {
		case want && !on:
			ctx, cancel := context.WithCancel(context.Background())
			g.feeds[i] = cancel
			name := groupcore.ShardName(g.cfg.Name, i)
			g.h.Go(func() {
				// Every event, the first ("listening") too: the shard's
				// lock may have read it before the feed listened, and
				// missed its release.
				err := w.Watch(ctx, name, func(ev lease.Event) {
					if !g.h.Do(func() { g.e.c.Noticed(i, ev) }) {
						cancel() // the run is over
					}
				})
				if ctx.Err() == nil {
					g.log(slog.LevelWarn, "no change feed from the store: waiting for the shard by polls", "shard", i, "err", err)
				}
			})
		case !want && on:
			stop()
			delete(g.feeds, i)
		}
	}
}

// stopFeeds stops every shard's feed, once the loop has ended.
func (g *Group) stopFeeds() {
	for i, stop := range g.feeds {
		stop()
		delete(g.feeds, i)
	}
}
