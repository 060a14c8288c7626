package testservers

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeClient returns a clientset of the kube-apiserver as user (see Kube).
func KubeClient(t testing.TB, user string) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(Kube(t, user))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// KubeNamespace makes a namespace of the test's own, deleted after it.
func KubeNamespace(t testing.TB) string {
	t.Helper()
	admin := KubeClient(t, "admin")
	name := strings.ToLower(UniqueName("t"))
	ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
	defer cancel()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
		defer cancel()
		_ = admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// KubeGrant binds user a Role of verbs on leases in ns, and waits until
// the API server's authorizer, which learns of a binding from its own
// watch, lets user get a lease there.
func KubeGrant(t testing.TB, ns, user string, verbs ...string) {
	t.Helper()
	KubeRole(t, ns, user, rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs})
}

// KubeLabelRole binds user the Role of deploy/kubernetes in ns: get,
// create and update on leases, get and patch on pods (tenure run
// --label-pod).
func KubeLabelRole(t testing.TB, ns, user string) {
	t.Helper()
	KubeRole(t, ns, user,
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "patch"}})
}

// KubeRole binds user a Role of rules in ns, and waits until the API
// server's authorizer lets user get a lease there: rules must allow that.
func KubeRole(t testing.TB, ns, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
	defer cancel()
	admin := KubeClient(t, "admin")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leases := KubeClient(t, user).CoordinationV1().Leases(ns)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := leases.Get(ctx, "probe", metav1.GetOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s's binding in %s never took effect: %v", user, ns, err)
		}
	}
}

// KubeConfigFile writes a kubeconfig for the kube-apiserver as user, its
// one context named "test", and returns its path.
func KubeConfigFile(t testing.TB, user string) string {
	t.Helper()
	rc := Kube(t, user)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: user}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
