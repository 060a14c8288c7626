// Package kube is tenure's store on Kubernetes Lease objects, the code of
// lease/k8slease, over a narrow Leases interface: client-go's typed client
// (what k8slease.New takes) satisfies it, and so does the light client of
// this package (NewClient), on client-go's rest client alone, which the
// tenure command uses. The typed clients register every API group of
// Kubernetes in one scheme when they are linked in: 33 MB of the binary
// and a third of its memory at start, for one resource.
//
// The package doc of lease/k8slease says what the store does and
// guarantees; this package holds how.
package kube

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
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// The annotations of a Lease tenure writes (lease/k8slease says what
// each holds).
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

// Leases is what a Store calls: the calls of client-go's typed
// LeaseInterface that it uses, with their signatures, so that
// CoordinationV1().Leases(ns) of a Clientset is one.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Store is a lease.Store on the Leases of one namespace. It is safe for
// concurrent use. Make one with NewStore.
type Store struct {
	leases Leases
	ns     string
	// namespace asks whether the namespace exists (nil, or an error the
	// API server gave: 404 if it does not); nil if it cannot be asked.
	namespace func(context.Context) error

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

// NewStore returns a Store on the Leases of namespace ns, reached through
// leases; namespace, if not nil, asks the API server for the namespace. It
// sends nothing.
func NewStore(leases Leases, ns string, namespace func(context.Context) error) (*Store, error) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("k8slease: namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	return &Store{leases: leases, ns: ns, namespace: namespace, seen: map[string]*coordinationv1.Lease{}}, nil
}

// absent returns the error of a lease whose Lease the API server did not
// find: lease.ErrNotFound, unless the namespace itself does not exist. A
// read of a Lease in a missing namespace is a plain 404 (only a write
// names the namespace), so the first time a Lease is not found the
// namespace is asked for; where that is not allowed (get on namespaces is
// cluster-wide), a missing namespace reads as no record.
func (s *Store) absent(ctx context.Context, name string) error {
	if s.nsKnown.Load() || s.namespace == nil {
		return lease.NotFound(name)
	}
	err := s.namespace(ctx)
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

// rememberNewer remembers obj, told by the watch, unless what is
// remembered of name is as new: a watch's event can come after the answer
// to the write that made a later version, and the writer's next write
// needs that one. resourceVersions are compared as the numbers the API
// server makes them (etcd's revisions); obj is not remembered where one
// is not.
func (s *Store) rememberNewer(name string, obj *coordinationv1.Lease) {
	n, err := strconv.ParseUint(obj.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.seen[name]; old != nil {
		if o, err := strconv.ParseUint(old.ResourceVersion, 10, 64); err != nil || o >= n {
			return
		}
	}
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
