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

// A namespace that does not exist fails a write for good, and says so.
func TestIntegrationMissingNamespace(t *testing.T) {
	s := newStore(t, "admin", "no-such-namespace")
	_, err := s.Put(context.Background(), "x", record("n1"), lease.NoVersion)
	if !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "kubectl create namespace") {
		t.Fatalf("Put: %v; want a permanent error saying to create the namespace", err)
	}
}
