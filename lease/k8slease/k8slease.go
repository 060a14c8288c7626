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
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// The annotations of a Lease tenure writes.
const (
	AnnotationName      = "tenure.dev/name"
	AnnotationToken     = "tenure.dev/token"
	AnnotationNonce     = "tenure.dev/nonce"
	AnnotationDuration  = "tenure.dev/duration"
	AnnotationWrittenAt = "tenure.dev/written-at"
	AnnotationReleased  = "tenure.dev/released"
	AnnotationPayload   = "tenure.dev/payload"
	annotationWrite     = "tenure.dev/write"
	// annotationHolder keeps a released record's holder: the Lease's
	// holderIdentity is cleared on release, as client-go does, so that
	// kubectl get lease shows it free.
	annotationHolder = "tenure.dev/holder"
)

// Config configures a Store.
type Config struct {
	// Namespace is where the Leases are. Required.
	Namespace string
}

// Store is a lease.Store on the Leases of one namespace. It is safe for
// concurrent use. Make one with New.
type Store struct {
	leases coordclient.LeaseInterface
	ns     string
	rest   rest.Interface // the client's, to ask whether the namespace exists; nil if it has none

	nsKnown atomic.Bool // the namespace was seen to exist, or cannot be checked

	mu   sync.Mutex
	seen map[string]*coordinationv1.Lease // per lease, the Lease last read or written
}

var (
	_ lease.Store   = (*Store)(nil)
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

// maxSeen bounds the Leases a Store remembers: past it, it forgets them
// all, and the next write of each starts from a fresh object.
const maxSeen = 4096

// New returns a Store on the Leases of cfg.Namespace, reached through
// client (usually kubernetes.NewForConfig(...).CoordinationV1()). It sends
// nothing.
func New(client coordclient.LeasesGetter, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("k8slease: nil client: pass kubernetes.Interface.CoordinationV1()")
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("k8slease: namespace %q: %s", cfg.Namespace, strings.Join(errs, "; "))
	}
	s := &Store{leases: client.Leases(cfg.Namespace), ns: cfg.Namespace, seen: map[string]*coordinationv1.Lease{}}
	if rc, ok := client.(interface{ RESTClient() rest.Interface }); ok {
		s.rest = rc.RESTClient()
	}
	return s, nil
}

// absent returns the error of a lease whose Lease the API server did not
// find: lease.ErrNotFound, unless the namespace itself does not exist. A
// read of a Lease in a missing namespace is a plain 404 (only a write
// names the namespace), so the first time a Lease is not found the
// namespace is asked for; where that is not allowed (get on namespaces is
// cluster-wide), a missing namespace reads as no record.
func (s *Store) absent(ctx context.Context, name string) error {
	if s.nsKnown.Load() || s.rest == nil {
		return lease.NotFound(name)
	}
	err := s.rest.Get().AbsPath("/api/v1/namespaces", s.ns).Do(ctx).Error()
	switch {
	case err == nil, apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		s.nsKnown.Store(true)
		return lease.NotFound(name)
	case apierrors.IsNotFound(err):
		return s.failed(ctx, "get", name, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, s.ns))
	}
	return s.failed(ctx, "get", name, err)
}

// ObjectName returns the name of the Lease that holds the lease name.
func ObjectName(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	sum := sha256.Sum256([]byte(name))
	obj := strings.Trim(string(b), "-") + "-" + hex.EncodeToString(sum[:5])
	if len(obj) > validation.DNS1123SubdomainMaxLength {
		obj = obj[len(obj)-validation.DNS1123SubdomainMaxLength:]
		obj = strings.TrimLeft(obj, "-")
	}
	return obj
}

// Get implements lease.Store with one quorum read of the Lease.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	obj, err := s.leases.Get(ctx, ObjectName(name), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && !namespaceMissing(err) {
			return lease.Record{}, lease.NoVersion, s.absent(ctx, name)
		}
		return lease.Record{}, lease.NoVersion, s.failed(ctx, "get", name, err)
	}
	rec, err := s.decode(name, obj)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	s.remember(name, obj)
	s.nsKnown.Store(true)
	return rec, lease.Version(obj.ResourceVersion), nil
}

// decode reads the record of the lease name from obj, refusing a Lease
// tenure did not write or that holds another lease.
func (s *Store) decode(name string, obj *coordinationv1.Lease) (lease.Record, error) {
	a := obj.Annotations
	bad := func(field, format string, args ...any) error {
		return &lease.RecordError{Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	tok, ok := a[AnnotationToken]
	if !ok {
		holder := ""
		if obj.Spec.HolderIdentity != nil {
			holder = *obj.Spec.HolderIdentity
		}
		return lease.Record{}, bad(foreignField, "Lease %s/%s (holderIdentity %q) was written by something other than tenure (client-go's leaderelection, a controller: it has no %s annotation), and tenure never takes over a Lease it did not write", s.ns, obj.Name, holder, AnnotationToken)
	}
	if got := a[AnnotationName]; got != name {
		return lease.Record{}, bad("annotations", "Lease %s/%s holds the lease %q, not %q", s.ns, obj.Name, got, name)
	}
	var rec lease.Record
	var err error
	rec.Holder = holderOf(obj)
	if rec.Token, err = strconv.ParseUint(tok, 10, 64); err != nil {
		return lease.Record{}, bad("token", "%s %q: %v", AnnotationToken, tok, err)
	}
	if rec.Duration, err = time.ParseDuration(a[AnnotationDuration]); err != nil {
		return lease.Record{}, bad("duration", "%s %q: %v", AnnotationDuration, a[AnnotationDuration], err)
	}
	if rec.WrittenAt, err = time.Parse(time.RFC3339Nano, a[AnnotationWrittenAt]); err != nil {
		return lease.Record{}, bad("written_at", "%s %q: %v", AnnotationWrittenAt, a[AnnotationWrittenAt], err)
	}
	rec.Nonce = a[AnnotationNonce]
	rec.Released = a[AnnotationReleased] == "true"
	if p, ok := a[AnnotationPayload]; ok {
		if rec.Payload, err = base64.StdEncoding.DecodeString(p); err != nil {
			return lease.Record{}, bad("payload", "%s: %v", AnnotationPayload, err)
		}
	}
	if err := rec.Validate(name); err != nil {
		return lease.Record{}, err
	}
	return rec, nil
}

// foreignField is the field a RecordError names for a Lease tenure did
// not write (Foreign).
const foreignField = "writer"

// Foreign reports whether err is the refusal of a Lease that tenure did
// not write (client-go's leaderelection's, a controller's): tenure never
// takes one over, and tenure list shows it as foreign.
func Foreign(err error) bool {
	var re *lease.RecordError
	return errors.As(err, &re) && re.Field == foreignField
}

// holderOf returns the holder of the record in obj: its holderIdentity,
// or, released, the holder kept beside it.
func holderOf(obj *coordinationv1.Lease) string {
	if h := obj.Spec.HolderIdentity; h != nil && *h != "" {
		return *h
	}
	return obj.Annotations[annotationHolder]
}

// Put implements lease.Store: a Create for a new lease, otherwise an Update
// carrying expect as the resourceVersion.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	var obj *coordinationv1.Lease
	var err error
	if expect == lease.NoVersion {
		obj, err = s.leases.Create(ctx, s.encode(name, rec, nil), metav1.CreateOptions{})
	} else {
		prev := s.recall(name, expect)
		if prev == nil {
			// Not the Lease this Store last saw: read it, for its UID
			// (below) and what the write keeps of it.
			prev, err = s.leases.Get(ctx, ObjectName(name), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) && !namespaceMissing(err):
				return lease.NoVersion, lease.Conflict(name)
			case err != nil:
				return lease.NoVersion, s.failed(ctx, "put", name, err)
			case prev.ResourceVersion != string(expect):
				return lease.NoVersion, lease.Conflict(name)
			}
		}
		obj, err = s.leases.Update(ctx, s.encode(name, rec, prev), metav1.UpdateOptions{})
		if err == nil && obj.UID != prev.UID {
			// The Lease was deleted since: the API server creates a Lease
			// an Update names (AllowCreateOnUpdate), whatever version it
			// carries. Undo that; the version expected is gone.
			return lease.NoVersion, s.undoCreate(ctx, name, obj)
		}
	}
	switch {
	case err == nil:
		s.remember(name, obj)
		return lease.Version(obj.ResourceVersion), nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err),
		apierrors.IsNotFound(err) && expect != lease.NoVersion && !namespaceMissing(err):
		return lease.NoVersion, lease.Conflict(name)
	}
	return lease.NoVersion, s.failed(ctx, "put", name, err)
}

// undoCreate deletes obj, the Lease of name an Update created, unless it
// changed since, and returns the write's conflict.
func (s *Store) undoCreate(ctx context.Context, name string, obj *coordinationv1.Lease) error {
	uid, rv := obj.UID, obj.ResourceVersion
	err := s.leases.Delete(ctx, obj.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return s.failed(ctx, "put", name, fmt.Errorf("the Lease was gone, and the one the update created could not be deleted: %w", err))
	}
	return lease.Conflict(name)
}

// encode returns the Lease holding rec, from prev (the Lease the write
// replaces, its labels and other annotations kept) or anew.
func (s *Store) encode(name string, rec lease.Record, prev *coordinationv1.Lease) *coordinationv1.Lease {
	obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: ObjectName(name), Namespace: s.ns}}
	var was coordinationv1.LeaseSpec
	if prev != nil {
		obj.ObjectMeta = *prev.ObjectMeta.DeepCopy()
		was = prev.Spec
	}
	a := map[string]string{}
	for k, v := range obj.Annotations {
		if !strings.HasPrefix(k, "tenure.dev/") {
			a[k] = v
		}
	}
	a[AnnotationName] = name
	a[annotationWrite] = recordjson.NewWriteID() // a write that changes nothing else still makes a new version
	a[AnnotationToken] = strconv.FormatUint(rec.Token, 10)
	a[AnnotationNonce] = rec.Nonce
	a[AnnotationDuration] = rec.Duration.String()
	a[AnnotationWrittenAt] = rec.WrittenAt.UTC().Format(time.RFC3339Nano)
	holder := rec.Holder
	var holderID *string // kubectl shows a released Lease free, as client-go leaves it
	if rec.Released {
		a[AnnotationReleased] = "true"
		a[annotationHolder] = holder
	} else {
		holderID = &holder
	}
	if rec.Payload != nil {
		a[AnnotationPayload] = base64.StdEncoding.EncodeToString(rec.Payload)
	}
	obj.Annotations = a
	secs := int32((rec.Duration + time.Second - 1) / time.Second)
	written := metav1.NewMicroTime(rec.WrittenAt)
	obj.Spec = coordinationv1.LeaseSpec{HolderIdentity: holderID, LeaseDurationSeconds: &secs, RenewTime: &written,
		AcquireTime: was.AcquireTime, LeaseTransitions: was.LeaseTransitions}
	// A new term (a token not the one written before) is an acquisition.
	if prev == nil || prev.Annotations[AnnotationToken] != a[AnnotationToken] || was.AcquireTime == nil {
		obj.Spec.AcquireTime = &written
		if prev != nil && holderOf(prev) != "" && holderOf(prev) != holder {
			n := int32(1)
			if was.LeaseTransitions != nil {
				n = *was.LeaseTransitions + 1
			}
			obj.Spec.LeaseTransitions = &n
		}
	}
	return obj
}

// remember keeps obj, the Lease of name as last read or written, for the
// next Update of it.
func (s *Store) remember(name string, obj *coordinationv1.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) >= maxSeen {
		clear(s.seen)
	}
	s.seen[name] = obj
}

// recall returns the Lease of name at version v, if it was the last read
// or written; nil otherwise.
func (s *Store) recall(name string, v lease.Version) *coordinationv1.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if obj := s.seen[name]; obj != nil && obj.ResourceVersion == string(v) {
		return obj
	}
	return nil
}

// namespaceMissing reports whether err is the API server's 404 for the
// namespace rather than for the Lease.
func namespaceMissing(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Kind == "namespaces"
}

// failed wraps a failed call's error: the context's error when ctx ended,
// and permanent when retrying cannot cure it, with what to do.
func (s *Store) failed(ctx context.Context, op, name string, err error) error {
	err = fmt.Errorf("%s lease %q (Lease %s/%s): %w", op, name, s.ns, ObjectName(name), lease.CallError(ctx, err))
	switch {
	case namespaceMissing(err):
		return lease.Permanent(fmt.Errorf("%w; the namespace %q does not exist: create it (kubectl create namespace %s), or name the right one", err, s.ns, s.ns))
	case apierrors.IsForbidden(err):
		return lease.Permanent(fmt.Errorf("%w; grant the ServiceAccount a Role with get, create and update on leases (coordination.k8s.io) in namespace %q (a rule of apiGroups [coordination.k8s.io], resources [leases], verbs [get list watch create update])", err, s.ns))
	case apierrors.IsUnauthorized(err):
		return lease.Permanent(fmt.Errorf("%w; the API server does not accept these credentials: check the token or kubeconfig", err))
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return lease.Permanent(err)
	}
	return err
}
