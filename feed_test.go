package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// watched is a node's store: its Faults, over a Feed that every node
// writes through, whose events it hears.
type watched struct {
	*leasetest.Faults
	feed *leasetest.Feed
}

func (w watched) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	return w.feed.Watch(ctx, name, fn)
}

// onFeed makes a node follow the world's Feed.
func onFeed(feed *leasetest.Feed) func(*tenure.Config) {
	return func(c *tenure.Config) { c.Store = watched{c.Store.(*leasetest.Faults), feed} }
}

// feedLeader returns a world on a store with a change feed, and a on it,
// elected.
func feedLeader(t *testing.T) (*world, *leasetest.Feed, *node) {
	w := newWorld(t)
	feed := leasetest.NewFeed(memlease.New())
	w.store = feed
	a := w.start("a", nil, onFeed(feed))
	synctest.Wait()
	return w, feed, a
}

// lastPut records when n last wrote the lease.
func lastPut(n *node) func() time.Time {
	var mu sync.Mutex
	var at time.Time
	n.faults.SetHook(func(op, name string) error {
		if op == "put" && name == leaseName {
			mu.Lock()
			at = time.Now()
			mu.Unlock()
		}
		return nil
	})
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
}

// On a store with a change feed, a follower reads on each renewal it
// tells of, so that after a crash it takes over exactly L×(1+ρ) after the
// leader's last renewal (store calls take no time in the bubble), not up
// to a poll later; and a graceful handoff takes no poll at all. Its polls
// wait the longest poll, so it reads no more often than without a feed.
func TestFeedFollowerReadsOnRenewals(t *testing.T) {
	for _, crashAfter := range []time.Duration{300 * time.Millisecond, 1100 * time.Millisecond, 1900 * time.Millisecond} {
		t.Run(fmt.Sprint("crash ", crashAfter), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, feed, a := feedLeader(t)
				b := w.start("b", nil, onFeed(feed))
				reads := leaseReads(b)
				// Counted between renewals (they come at even seconds), so
				// that none races the count.
				wait(time.Minute + time.Second)
				// One read a renewal (every 2s), as often as it would poll:
				// 30, its first, and perhaps a poll before the first renewal.
				if got := reads.Load(); got > 32 {
					t.Errorf("b read the lease %d times in its first 61s, want 32 at most", got)
				}
				renewed := lastPut(a)
				wait(time.Second - time.Nanosecond) // just before a renewal: one came 2s before
				synctest.Wait()
				wait(crashAfter)
				a.faults.FailAll()
				last := renewed()
				if err := a.stop(); !errors.Is(err, leasetest.ErrInjected) {
					t.Fatalf("a's Run = %v", err)
				}
				wait(time.Minute)
				tm := w.lastTerm()
				if tm.node != "b" {
					t.Fatalf("after the crash: %+v, want b", tm)
				}
				if d, want := tm.elected.Sub(last), 10010*time.Millisecond; d != want {
					t.Errorf("crash %v after a renewal: b elected %v after it, want %v", crashAfter, d, want)
				}
			})
		})
	}
}

// lagging is a node's store whose feed tells of each write late, by
// turns at once and 300ms later (more than a poll's 10% jitter of 2s):
// some renewals reach the follower after its routine poll has read them.
type lagging struct{ watched }

func (l lagging) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	var mu sync.Mutex
	n := 0
	return l.feed.Watch(ctx, name, func(ev lease.Event) {
		mu.Lock()
		n++
		late := n%2 == 0
		mu.Unlock()
		if !late {
			fn(ev)
			return
		}
		time.AfterFunc(300*time.Millisecond, func() {
			if ctx.Err() == nil {
				fn(ev)
			}
		})
	})
}

// A follower whose poll reads a renewal before the feed tells of it does
// not read again on the event, which names what it read: it reads once a
// renewal, no more often than it would poll without the feed.
func TestFeedLateEventsReadOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, feed, _ := feedLeader(t)
		b := w.start("b", nil, func(c *tenure.Config) {
			c.Store = lagging{watched{c.Store.(*leasetest.Faults), feed}}
		})
		reads := leaseReads(b)
		wait(time.Minute + time.Second) // between renewals: none races the count
		if got := reads.Load(); got > 32 {
			t.Errorf("b read the lease %d times in its first 61s, want 32 at most (30 renewals, its first read, perhaps a poll before the first renewal)", got)
		}
		if tm := w.lastTerm(); tm.node != "a" {
			t.Errorf("the leader is %+v, want a", tm)
		}
	})
}

// A graceful release reaches a follower on the feed at once.
func TestFeedHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, feed, a := feedLeader(t)
		w.start("b", nil, onFeed(feed))
		wait(time.Minute + 700*time.Millisecond)
		stopped := time.Now()
		if err := a.stop(); err != nil {
			t.Fatalf("a's Run = %v", err)
		}
		synctest.Wait()
		if tm := w.lastTerm(); tm.node != "b" || !tm.elected.Equal(stopped) {
			t.Fatalf("after a's release at %v: %+v, want b elected at once", stopped, tm)
		}
	})
}

// A Lock call that waits on a store with a change feed, plain or at the
// head of a fair queue, reads on each write of the lock: the holder's
// Unlock reaches it at once, with no wake-up address (store calls take no
// time in the bubble), wherever between two renewals it comes. (Without
// the feed: 0.6 to 1.9s, a poll.)
func TestFeedLockHandoff(t *testing.T) {
	for _, c := range []struct {
		off  time.Duration
		opts []tenure.LockOption
	}{
		{300 * time.Millisecond, nil}, {1300 * time.Millisecond, nil}, {1900 * time.Millisecond, nil},
		{300 * time.Millisecond, []tenure.LockOption{tenure.Fair()}}, {1300 * time.Millisecond, []tenure.LockOption{tenure.Fair()}}, {1900 * time.Millisecond, []tenure.LockOption{tenure.Fair()}},
	} {
		off := c.off
		t.Run(fmt.Sprintf("fair=%t/%v", len(c.opts) > 0, off), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				feed := leasetest.NewFeed(memlease.New())
				locker := func(id string) *tenure.Locker {
					l, err := tenure.NewLocker(tenure.LockerConfig{Store: feed, Runtime: tenure.Runtime{ID: id}})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Close() })
					return l
				}
				a, b := locker("a"), locker("b")
				ctx := context.Background()
				held, err := a.Lock(ctx, "job")
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan time.Time, 1)
				go func() {
					h, err := b.Lock(ctx, "job", c.opts...)
					if err != nil {
						t.Error(err)
						got <- time.Time{}
						return
					}
					got <- time.Now()
					_ = h.Unlock(ctx)
				}()
				wait(time.Minute + off) // a renewed at 1m
				unlocked := time.Now()
				if err := held.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if at := <-got; !at.Equal(unlocked) {
					t.Errorf("unlocked at %v, b took the lock at %v, want at once", unlocked, at)
				}
			})
		})
	}
}

// A Lock call that waits on a store with a change feed takes each renewal
// the feed tells of as a notice: after the holder's crash it takes the
// lock exactly L×(1+ρ) after the holder's last renewal (store calls take
// no time in the bubble), wherever between two renewals the crash comes,
// not up to a poll later.
func TestFeedLockTakeoverAfterCrash(t *testing.T) {
	for _, crashAfter := range []time.Duration{300 * time.Millisecond, 1100 * time.Millisecond, 1900 * time.Millisecond} {
		t.Run(fmt.Sprint("crash ", crashAfter), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				feed := leasetest.NewFeed(memlease.New())
				held := leasetest.NewFaults(feed) // the holder's store, to cut it off
				var mu sync.Mutex
				var renewed time.Time
				held.SetHook(func(op, name string) error {
					if op == "put" && name == "job" {
						mu.Lock()
						renewed = time.Now()
						mu.Unlock()
					}
					return nil
				})
				locker := func(id string, store lease.Store) *tenure.Locker {
					l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { l.Close() })
					return l
				}
				a, b := locker("a", held), locker("b", feed)
				ctx := context.Background()
				if _, err := a.Lock(ctx, "job"); err != nil {
					t.Fatal(err)
				}
				got := make(chan time.Time, 1)
				go func() {
					h, err := b.Lock(ctx, "job")
					if err != nil {
						t.Error(err)
						got <- time.Time{}
						return
					}
					got <- time.Now()
					_ = h.Unlock(ctx)
				}()
				wait(time.Minute + time.Second - time.Nanosecond) // just before a renewal: one came 2s before
				synctest.Wait()
				wait(crashAfter)
				held.FailAll() // a crashes: it writes no more
				mu.Lock()
				last := renewed
				mu.Unlock()
				if d, want := (<-got).Sub(last), 10010*time.Millisecond; d != want {
					t.Errorf("crash %v after a renewal: b took the lock %v after the last renewal, want %v", crashAfter, d, want)
				}
			})
		})
	}
}

// A group member on a store with a change feed listens to the shards it
// waits for: a shard handed over on a join is taken by its next owner as
// its release lands (store calls take no time in the bubble), and one
// handed over on a graceful leave within a beat, with no wake-up address;
// a poll is 20s away.
func TestFeedGroupHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 8
		feed := leasetest.NewFeed(memlease.New())
		var mu sync.Mutex
		released := map[int]time.Time{}
		var gaps []time.Duration
		start := func(id string) (*tenure.Group, context.CancelFunc, chan error) {
			g, err := tenure.NewGroup(tenure.GroupConfig{Store: feed, Name: "ingest", Shards: k, Runtime: tenure.Runtime{ID: id, WakeAddr: tenure.NoWake},
				Timing: tenure.Timing{LeaseDuration: 30 * time.Second, RenewInterval: 300 * time.Millisecond, PollInterval: 20 * time.Second, OpTimeout: 300 * time.Millisecond},
				OnAssigned: func(ctx context.Context, s tenure.Shard) {
					mu.Lock()
					defer mu.Unlock()
					if at, ok := released[s.ID]; ok {
						gaps = append(gaps, time.Since(at))
						delete(released, s.ID)
					}
				},
				OnRevoked: func(s tenure.Shard, _ tenure.DemotionReason) {
					mu.Lock()
					defer mu.Unlock()
					released[s.ID] = time.Now()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			stop, done := runGroup(t, g)
			return g, stop, done
		}
		a, _, _ := start("a")
		wait(time.Minute)
		b, stopB, doneB := start("b")
		wait(time.Minute)
		if ha, hb := len(a.Status().Held), len(b.Status().Held); ha != k/2 || hb != k/2 {
			t.Fatalf("after b's join: a holds %d shards, b %d; want %d each", ha, hb, k/2)
		}
		stopB()
		if err := <-doneB; err != nil {
			t.Fatal(err)
		}
		doneB <- nil
		wait(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if len(gaps) != k {
			t.Fatalf("%d shards taken after a release, want %d (%d handed over on the join, as many on the leave)", len(gaps), k, k/2)
		}
		// On the join, b waits for its shards with a lock each and reads
		// on their releases: at once. On the leave, a learns of it at its
		// next beat (300ms), and then waits for b's shards: within a beat.
		for i, gap := range gaps {
			if limit := map[bool]time.Duration{true: 0, false: 300 * time.Millisecond}[i < k/2]; gap > limit {
				t.Fatalf("a shard unowned for %v between its release and its next owner's term (gaps %v): not read on the feed", gap, gaps)
			}
		}
	})
}
