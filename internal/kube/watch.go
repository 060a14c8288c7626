package kube

import (
	"context"
	"errors"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tenure-go/tenure/internal/relisten"
	"github.com/tenure-go/tenure/lease"
)

var _ lease.Watcher = (*Store)(nil)

// Watch implements lease.Watcher with a watch on the lease's Lease object
// (the list and watch verbs on leases), from a list of it. A watch the API server ends (they last
// minutes) is resumed from the last resourceVersion seen, so nothing is
// missed; one resumed too late (410 Gone: etcd compacted past it) or
// broken by an error starts over from the current state and tells fn so.
func (s *Store) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if err := lease.CheckGet(ctx, name); err != nil {
		return err
	}
	opts := metav1.ListOptions{
		FieldSelector:       fields.OneTermEqualSelector("metadata.name", ObjectName(name)).String(),
		AllowWatchBookmarks: true,
	}
	var pause relisten.Backoff
	for {
		fresh := opts.ResourceVersion == ""
		var w watch.Interface
		err := s.start(ctx, &opts)
		if err == nil {
			w, err = s.leases.Watch(ctx, opts)
		}
		if err == nil {
			if fresh {
				fn(lease.Event{}) // listening from now: what came before, a read finds
			}
			opts.ResourceVersion = s.follow(name, w, fn, opts.ResourceVersion)
			w.Stop()
			if opts.ResourceVersion != "" {
				pause.Reset() // the server ended it, as it does every few minutes: resume at once
				continue
			}
		} else if err = s.failed(ctx, "watch", name, err); errors.Is(err, lease.ErrPermanent) {
			return err
		}
		if ctx.Err() != nil {
			return s.failed(ctx, "watch", name, ctx.Err())
		}
		if !pause.Wait(ctx) { // unreachable, or failing: less and less often
			return s.failed(ctx, "watch", name, ctx.Err())
		}
	}
}

// start sets where a watch starts from, when it does not resume: the
// resourceVersion of a list of the one Lease, a consistent read. (A watch
// from "now" without one needs etcd's progress requests, which not every
// API server has.)
func (s *Store) start(ctx context.Context, opts *metav1.ListOptions) error {
	if opts.ResourceVersion != "" {
		return nil
	}
	l, err := s.leases.List(ctx, metav1.ListOptions{FieldSelector: opts.FieldSelector})
	if err != nil {
		return err
	}
	opts.ResourceVersion = l.ResourceVersion
	return nil
}

// follow passes w's events to fn until w ends, each with the record the
// Lease holds (none for a Lease that is not a record of name's). It
// returns the resourceVersion to resume from, or "" to start over from a
// fresh list when w failed: above all with 410 Gone (the version it would
// resume from is compacted away, or no longer in the API server's watch
// cache), which asking for it again would meet for ever.
func (s *Store) follow(name string, w watch.Interface, fn func(lease.Event), rv string) string {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			obj, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			rv = obj.ResourceVersion
			e := lease.Event{Version: lease.Version(rv), Released: obj.Annotations[AnnotationReleased] == "true"}
			if rec, err := s.decode(name, obj); err == nil {
				e.Record = &rec
				// A follower that takes over from this version finds
				// the Lease in hand, as after a read of it.
				s.rememberNewer(name, obj)
			}
			fn(e)
		case watch.Deleted:
			if obj, ok := ev.Object.(*coordinationv1.Lease); ok {
				rv = obj.ResourceVersion
			}
			fn(lease.Event{})
		case watch.Bookmark:
			if obj, ok := ev.Object.(*coordinationv1.Lease); ok {
				rv = obj.ResourceVersion
			}
		case watch.Error:
			return ""
		}
	}
	return rv
}
