// Package relisten spaces a change feed's attempts to listen again after
// it broke (lease.Watcher's stores): at once after one that worked, then
// 250ms, doubling up to 30s while they fail, so that a feed that cannot be
// opened costs a request every 30s, not a hot loop.
package relisten

import (
	"context"
	"time"
)

// Backoff is the pause before the next attempt. The zero Backoff is ready.
type Backoff struct{ d time.Duration }

// Reset says an attempt worked: the next pause starts short again.
func (b *Backoff) Reset() { b.d = 0 }

// Wait pauses longer than the time before, and reports whether the pause
// ended before ctx was done.
func (b *Backoff) Wait(ctx context.Context) bool {
	b.d = min(max(2*b.d, 250*time.Millisecond), 30*time.Second)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
