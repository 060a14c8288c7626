package etcdlease

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/internal/relisten"
	"github.com/tenure-go/tenure/lease"
)

var _ lease.Watcher = (*Store)(nil)

// Watch implements lease.Watcher with an etcd watch on the lease's key. It
// needs a KV that is also a clientv3.Watcher (a *clientv3.Client is) and
// read permission on the key. A watch requires a leader, so that a member
// cut off from its cluster ends it rather than going quiet; one that breaks
// is resumed from the revision after the last event, or, once that is
// compacted away, started over (and fn told so).
func (s *Store) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if err := lease.CheckGet(ctx, name); err != nil {
		return err
	}
	w, ok := s.kv.(clientv3.Watcher)
	if !ok {
		return lease.Permanent(fmt.Errorf("watch lease %q: etcdlease.New was given a KV that cannot watch (%T): pass a *clientv3.Client", name, s.kv))
	}
	var next int64 // the revision to resume from; 0: start over
	var pause relisten.Backoff
	for {
		resumed, err := s.watchOnce(ctx, w, name, &next, fn)
		if ctx.Err() != nil {
			return s.failed(ctx, "watch", name, ctx.Err())
		}
		if errors.Is(err, lease.ErrPermanent) {
			return err
		}
		if resumed {
			pause.Reset()
		}
		if !pause.Wait(ctx) {
			return s.failed(ctx, "watch", name, ctx.Err())
		}
	}
}

// watchOnce runs one watch until it ends, passing its events to fn and
// keeping *next. It reports whether the watch was established, and the
// error that ended it.
func (s *Store) watchOnce(ctx context.Context, w clientv3.Watcher, name string, next *int64, fn func(lease.Event)) (bool, error) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
	if *next > 0 {
		opts = append(opts, clientv3.WithRev(*next))
	}
	created := false
	for resp := range w.Watch(ctx, s.Key(name), opts...) {
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 {
				*next = 0 // what we would resume from is gone
			}
			return created, s.failed(ctx, "watch", name, err)
		}
		if resp.Created && !created {
			created = true
			if *next == 0 {
				fn(lease.Event{}) // listening from now: what came before, a read finds
			}
		}
		for _, ev := range resp.Events {
			*next = ev.Kv.ModRevision + 1
			fn(event(name, ev))
		}
	}
	return created, errors.New("watch ended")
}

// event tells of an etcd event, with the record written: a value that is
// no record still says that something changed.
func event(name string, ev *clientv3.Event) lease.Event {
	if ev.Type != mvccpb.PUT {
		return lease.Event{}
	}
	e := lease.Event{Version: version(ev.Kv.ModRevision)}
	if rec, err := recordjson.Decode(name, ev.Kv.Value); err == nil {
		e.Released, e.Record = rec.Released, &rec
	}
	return e
}
