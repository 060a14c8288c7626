package k8slease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/k8slease"
	"github.com/tenure-go/tenure/lease/leasetest"
)

// Tests in this file talk to the kube-apiserver that scripts/testservers.sh
// starts (TENURE_KUBE_URL).

func clientset(t testing.TB, user string) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(testservers.Kube(t, user))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// namespace makes a namespace of the test's own, deleted after it.
func namespace(t testing.TB) string {
	t.Helper()
	admin := clientset(t, "admin")
	name := strings.ToLower(testservers.UniqueName("t"))
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
		defer cancel()
		_ = admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

func newStore(t testing.TB, user, ns string) *k8slease.Store {
	t.Helper()
	s, err := k8slease.New(clientset(t, user).CoordinationV1(), k8slease.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIntegrationConformance(t *testing.T) {
	s := newStore(t, "admin", namespace(t))
	leasetest.Run(t, func(t *testing.T) lease.Store { return s })
}

// TestIntegrationRace: 64 writers race on one Lease for 50 rounds; exactly
// one wins each.
func TestIntegrationRace(t *testing.T) {
	leasetest.Race(t, newStore(t, "admin", namespace(t)), 64, 50)
}

// grant binds user a Role of verbs on leases in ns.
func grant(t *testing.T, ns, user string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	admin := clientset(t, "admin")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func record(nonce string) lease.Record {
	return lease.Record{Holder: "a", Token: 1, Duration: 3 * time.Second, Nonce: nonce, WrittenAt: time.Now()}
}

// A Role with get, list, watch, create and update on leases is enough; one
// without update makes a renewal fail for good, naming the verb.
func TestIntegrationRBAC(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	grant(t, ns, "alice", "get", "list", "watch", "create", "update")
	grant(t, ns, "bob", "get", "list", "watch", "create")
	// RBAC takes a moment to see a new binding.
	waitAllowed(t, newStore(t, "alice", ns), "probe/alice")
	waitAllowed(t, newStore(t, "bob", ns), "probe/bob")

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

// waitAllowed waits until the store's user may get leases: the API
// server's RBAC authorizer learns of a new binding from its own watch.
func waitAllowed(t *testing.T, s *k8slease.Store, name string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testservers.SetupTimeout)
	for {
		_, _, err := s.Get(context.Background(), name)
		if errors.Is(err, lease.ErrNotFound) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the binding never took effect: %v", err)
		}
	}
}

// A Lease written by client-go's leaderelection is refused, never taken.
func TestIntegrationForeignLease(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	holder, secs := "controller-7f9c", int32(15)
	now := metav1.NewMicroTime(time.Now())
	_, err := clientset(t, "admin").CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
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
