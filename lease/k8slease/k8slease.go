// Package k8slease is a lease.Store on Kubernetes Lease objects
// (coordination.k8s.io/v1), through client-go's typed client: one Lease per
// lease, in one namespace, written by compare-and-swap on its
// resourceVersion. New takes a Clientset's CoordinationV1() (the package
// example makes one).
//
// # The conditional primitive
//
// A lease's version is its Lease's metadata.resourceVersion. A new lease is
// a Create, which the API server refuses (409 AlreadyExists) if the object
// exists; a write to an existing one is an Update carrying the version read,
// which it refuses (409 Conflict) if the object changed since. The API
// server applies both as one compare-and-swap in etcd, so of any number of
// writers that read the same version one succeeds. A Get without a
// resourceVersion reads from etcd with a quorum read: it sees every write
// that completed before it. Versions come from etcd's revision counter: a
// deleted and re-created Lease gets a new one, so a version is never handed
// out twice.
//
// The API server creates a Lease that an Update names if it does not exist
// and the Update carries no uid. An Update carries the uid of the Lease it
// read, which the API server checks (a Lease deleted since is a conflict);
// and an Update that created a Lease all the same (a uid not the one read)
// is undone, by a Delete conditional on the new Lease's uid and version,
// and reported as the conflict it is. A write's own tenure.dev/write
// annotation makes every write a new version, even one that changes
// nothing else.
//
// # The object
//
// The record lives where kubectl get lease shows it: holderIdentity (the
// holder; cleared once released, as client-go does, so that a released
// Lease shows free), leaseDurationSeconds (rounded up to whole seconds),
// acquireTime (the write that took the lease), renewTime (the holder's
// last write) and leaseTransitions, for humans. What tenure needs exactly
// is in annotations: tenure.dev/name (the lease's name), tenure.dev/token,
// tenure.dev/nonce, tenure.dev/duration, tenure.dev/written-at, and
// tenure.dev/released, tenure.dev/holder (a released record's holder) and
// tenure.dev/payload (base64) when set. A lease name
// that is already a valid object name (lowercase letters, digits, '-' and
// '.') is the Lease's name; any other ("jobs/Nightly", "lock/0::queue") is
// made one (lowercased, other bytes as '-') and given a hash of the name
// ("jobs-nightly-3f9a1c0b7e"); the annotation says which lease it holds.
//
// A Lease that tenure did not write (client-go's leaderelection writes one
// with holderIdentity and no tenure.dev annotations) is refused as
// foreign, lease.ErrInvalidRecord: tenure never takes one over.
//
// # Permissions
//
// A candidate's ServiceAccount needs a Role with get, create and update on
// leases in the namespace (list for tenure list and gc, delete for tenure gc
// and release --force):
//
//	rules:
//	- apiGroups: ["coordination.k8s.io"]
//	  resources: ["leases"]
//	  verbs: ["get", "list", "watch", "create", "update"]
//
// A refusal (401 or 403) is permanent, and its error names the verb and the
// resource, as the API server does; so is a namespace that does not exist.
package k8slease

import (
	"context"
	"errors"

	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/tenure-go/tenure/internal/kube"
	"github.com/tenure-go/tenure/lease"
)

// Config configures a Store.
type Config struct {
	// Namespace is where the Leases are. Required.
	Namespace string
}

// Store is a lease.Store on the Leases of one namespace. It is safe for
// concurrent use. Make one with New.
type Store struct{ s *kube.Store }

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
	_ lease.Watcher = (*Store)(nil)
)

// New returns a Store on the Leases of cfg.Namespace, reached through
// client (a Clientset's CoordinationV1()). It sends nothing.
func New(client coordclient.LeasesGetter, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("k8slease: nil client: pass kubernetes.Interface.CoordinationV1()")
	}
	var namespace func(context.Context) error
	if rc, ok := client.(interface{ RESTClient() rest.Interface }); ok {
		namespace = func(ctx context.Context) error {
			return rc.RESTClient().Get().AbsPath("/api/v1/namespaces", cfg.Namespace).Do(ctx).Error()
		}
	}
	s, err := kube.NewStore(client.Leases(cfg.Namespace), cfg.Namespace, namespace)
	if err != nil {
		return nil, err
	}
	return &Store{s}, nil
}

// ObjectName returns the name of the Lease that holds the lease name.
func ObjectName(name string) string { return kube.ObjectName(name) }

// Foreign reports whether err is the refusal of a Lease that tenure did
// not write (client-go's leaderelection's, a controller's): tenure never
// takes one over, and tenure list shows it as foreign.
func Foreign(err error) bool { return kube.Foreign(err) }

// Get implements lease.Store with one quorum read of the Lease.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return s.s.Get(ctx, name)
}

// Put implements lease.Store: a Create for a new lease, otherwise an
// Update carrying expect as the resourceVersion.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	return s.s.Put(ctx, name, rec, expect)
}

// List implements lease.Lister: the namespace's Leases, a page at a time,
// whose lease name starts with prefix: those tenure wrote by the name in
// tenure.dev/name, and the others (Foreign) by their object name, which
// Get refuses as foreign.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	return s.s.List(ctx, prefix, fn)
}

// Delete implements lease.Deleter: a Delete of the Lease with its
// resourceVersion as the precondition; with lease.AnyVersion, none.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	return s.s.Delete(ctx, name, expect)
}

// Watch implements lease.Watcher with a watch on the lease's Lease object
// (the list and watch verbs on leases), from a list of it. A watch the
// API server ends (they last minutes) is resumed from the last
// resourceVersion seen, so nothing is missed; one resumed too late (410
// Gone) or broken by an error starts over from the current state and
// tells fn so.
func (s *Store) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	return s.s.Watch(ctx, name, fn)
}
