package k8slease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/k8slease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// Tests in this file talk to the kube-apiserver that scripts/testservers.sh
// starts (TENURE_KUBE_URL).

func newStore(t testing.TB, user, ns string) *k8slease.Store {
	t.Helper()
	s, err := k8slease.New(testservers.KubeClient(t, user).CoordinationV1(), k8slease.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntegrationConformance(t *testing.T) {
	s := newStore(t, "admin", testservers.KubeNamespace(t))
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers race on one Lease for 50 rounds; exactly
// one wins each.
func TestIntegrationRace(t *testing.T) {
	leasetest.Race(t, newStore(t, "admin", testservers.KubeNamespace(t)), 64, 50)
}

func record(nonce string) lease.Record {
	return lease.Record{Holder: "a", Token: 1, Duration: 3 * time.Second, Nonce: nonce, WrittenAt: time.Now()}
}

// A Role with get, list, watch, create and update on leases is enough; one
// without update makes a renewal fail for good, naming the verb.
func TestIntegrationRBAC(t *testing.T) {
	ctx := context.Background()
	ns := testservers.KubeNamespace(t)
	testservers.KubeGrant(t, ns, "alice", "get", "list", "watch", "create", "update")
	testservers.KubeGrant(t, ns, "bob", "get", "list", "watch", "create")

	s := newStore(t, "alice", ns)
	v, err := s.Put(ctx, "jobs/nightly", record("n1"), lease.NoVersion)
	if err != nil {
		t.Fatalf("alice's create: %v", err)
	}
	if _, err := s.Put(ctx, "jobs/nightly", record("n2"), v); err != nil {
		t.Fatalf("alice's update: %v", err)
	}

	s = newStore(t, "bob", ns)
	if v, err = s.Put(ctx, "jobs/weekly", record("n1"), lease.NoVersion); err != nil {
		t.Fatalf("bob's create: %v", err)
	}
	_, err = s.Put(ctx, "jobs/weekly", record("n2"), v)
	if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), `cannot update resource "leases"`) {
		t.Fatalf("bob's update: %v; want a permanent error naming the verb update", err)
	}
}

// A Lease written by client-go's leaderelection is refused, never taken.
func TestIntegrationForeignLease(t *testing.T) {
	ctx := context.Background()
	ns := testservers.KubeNamespace(t)
	holder, secs := "controller-7f9c", int32(15)
	now := metav1.NewMicroTime(time.Now())
	_, err := testservers.KubeClient(t, "admin").CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "my-controller"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, "admin", ns)
	_, _, err = s.Get(ctx, "my-controller")
	if !errors.Is(err, lease.ErrInvalidRecord) || !strings.Contains(err.Error(), "never takes over") {
		t.Fatalf("Get of client-go's Lease: %v; want ErrInvalidRecord saying it is not tenure's", err)
	}
	if _, err := s.Put(ctx, "my-controller", record("n1"), lease.NoVersion); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Put over client-go's Lease: %v; want a conflict", err)
	}
}

// A namespace that does not exist fails a write for good, and says so;
// and so do a read and a list, for a user who may ask whether the
// namespace exists (a read in a missing namespace is a plain 404 of the
// Lease, and a list is empty).
func TestIntegrationMissingNamespace(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, "admin", "no-such-namespace")
	_, err := s.Put(ctx, "x", record("n1"), lease.NoVersion)
	if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "kubectl create namespace") {
		t.Fatalf("Put: %v; want a permanent error saying to create the namespace", err)
	}
	if _, _, err := s.Get(ctx, "x"); !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "kubectl create namespace") {
		t.Errorf("Get: %v; want a permanent error saying to create the namespace", err)
	}
	if err := s.List(ctx, "", func(string) error { return nil }); !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "kubectl create namespace") {
		t.Errorf("List: %v; want a permanent error saying to create the namespace", err)
	}
	// A namespace that exists, with no Lease: no record.
	ns := testservers.KubeNamespace(t)
	if _, _, err := newStore(t, "admin", ns).Get(ctx, "x"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get in a namespace with no Lease: %v; want no record", err)
	}
}

// An Update of a Lease deleted since it was read is a conflict, never a
// write: the API server creates the Lease an Update names, and the store
// undoes that.
func TestIntegrationUpdateOfDeletedLease(t *testing.T) {
	ctx := context.Background()
	ns := testservers.KubeNamespace(t)
	s := newStore(t, "admin", ns)
	v, err := s.Put(ctx, "job", record("n1"), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "job"); err != nil { // the store remembers the Lease read
		t.Fatal(err)
	}
	if err := testservers.KubeClient(t, "admin").CoordinationV1().Leases(ns).Delete(ctx, k8slease.ObjectName("job"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "job", record("n2"), v); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Put over a Lease deleted since it was read: %v; want a conflict", err)
	}
	if rec, _, err := s.Get(ctx, "job"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("after the conflict: %+v, %v; want no Lease (the one the update created undone)", rec, err)
	}
}

// A Lease whose tenure.dev/name names another lease (two names made one
// object name) is never read as this lease's record.
func TestIntegrationLeaseOfAnotherName(t *testing.T) {
	ctx := context.Background()
	ns := testservers.KubeNamespace(t)
	s := newStore(t, "admin", ns)
	if _, err := s.Put(ctx, "other", record("n1"), lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	leases := testservers.KubeClient(t, "admin").CoordinationV1().Leases(ns)
	obj, err := leases.Get(ctx, k8slease.ObjectName("other"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The same record, under the object name of "job".
	copied := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k8slease.ObjectName("job"), Annotations: obj.Annotations}, Spec: obj.Spec}
	if _, err := leases.Create(ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec, _, err := s.Get(ctx, "job"); !errors.Is(err, lease.ErrInvalidRecord) || !strings.Contains(err.Error(), `holds the lease "other"`) {
		t.Fatalf(`Get("job") of a Lease holding "other": %+v, %v; want ErrInvalidRecord naming "other"`, rec, err)
	}
}

// A released Lease shows free to kubectl (no holderIdentity, as client-go
// leaves one), and reads back with its holder and token.
func TestIntegrationReleasedShowsFree(t *testing.T) {
	ctx := context.Background()
	ns := testservers.KubeNamespace(t)
	s := newStore(t, "admin", ns)
	v, err := s.Put(ctx, "job", record("n1"), lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	rel := record("n2")
	rel.Released = true
	if _, err := s.Put(ctx, "job", rel, v); err != nil {
		t.Fatal(err)
	}
	obj, err := testservers.KubeClient(t, "admin").CoordinationV1().Leases(ns).Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := obj.Spec.HolderIdentity; h != nil {
		t.Errorf("released Lease has holderIdentity %q; want none", *h)
	}
	got, v2, err := s.Get(ctx, "job")
	if err != nil || !got.Released || got.Holder != "a" || got.Token != 1 {
		t.Fatalf("read back: %+v, %v; want released by a at token 1", got, err)
	}
	if _, err := s.Put(ctx, "job", lease.Record{Holder: "b", Token: 2, Duration: 3 * time.Second, Nonce: "n3", WrittenAt: time.Now()}, v2); err != nil {
		t.Fatal(err)
	}
	obj, _ = testservers.KubeClient(t, "admin").CoordinationV1().Leases(ns).Get(ctx, "job", metav1.GetOptions{})
	if h := obj.Spec.HolderIdentity; h == nil || *h != "b" || obj.Spec.LeaseTransitions == nil || *obj.Spec.LeaseTransitions != 1 {
		t.Errorf("taken by b: holderIdentity %v, transitions %v; want b and 1", h, obj.Spec.LeaseTransitions)
	}
}
