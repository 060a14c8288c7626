package leasetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/tenure-go/tenure/lease"
)

// Feed is a Store with a change feed of its own (lease.Watcher), for tests
// of code that follows one: it wraps a Store and tells its watchers of the
// writes made through it, each with its record. Each watcher has room for 16 events; more are
// dropped, as a real feed may drop them. Mute drops them all.
type Feed struct {
	lease.Store

	mu    sync.Mutex
	subs  map[string]map[chan lease.Event]bool // by lease name
	muted bool
}

var _ lease.Watcher = (*Feed)(nil)

// NewFeed returns a Feed that writes to s.
func NewFeed(s lease.Store) *Feed {
	return &Feed{Store: s, subs: map[string]map[chan lease.Event]bool{}}
}

// Mute drops every event from now on (true), or tells of writes again.
func (f *Feed) Mute(muted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.muted = muted
}

// Put implements lease.Store, and tells the lease's watchers of a write
// that succeeded.
func (f *Feed) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	v, err := f.Store.Put(ctx, name, rec, expect)
	if err == nil {
		told := rec.Clone()
		f.mu.Lock()
		for ch := range f.subs[name] {
			select {
			case ch <- lease.Event{Version: v, Released: rec.Released, Record: &told}:
			default:
			}
		}
		f.mu.Unlock()
	}
	return v, err
}

// Watch implements lease.Watcher.
func (f *Feed) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if err := lease.CheckGet(ctx, name); err != nil {
		return err
	}
	ch := make(chan lease.Event, 16)
	f.mu.Lock()
	if f.subs[name] == nil {
		f.subs[name] = map[chan lease.Event]bool{}
	}
	f.subs[name][ch] = true
	muted := f.muted
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subs[name], ch)
		f.mu.Unlock()
	}()
	if !muted {
		fn(lease.Event{})
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("watch lease %q: %w", name, ctx.Err())
		case ev := <-ch:
			f.mu.Lock()
			muted := f.muted
			f.mu.Unlock()
			if !muted {
				fn(ev)
			}
		}
	}
}
