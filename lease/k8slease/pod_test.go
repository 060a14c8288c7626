package k8slease_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease/k8slease"
)

// makePod makes a Pod object (no kubelet runs it) with labels.
func makePod(t *testing.T, cs kubernetes.Interface, ns, name string, labels map[string]string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "tenure"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// leaders returns the Pods a Service selecting the leader would send to.
func leaders(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=job," + k8slease.LeaderLabel + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

// awaitLeaders waits until exactly want carry the leader label.
func awaitLeaders(t *testing.T, cs kubernetes.Interface, ns string, want ...string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testservers.SetupTimeout)
	for {
		got := leaders(t, cs, ns)
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("labelled %v, want %v", got, want)
		}
	}
}

// TestIntegrationPodLabel: the leader's Pod, and only it, carries the
// leader label, so that a Service selecting it reaches the leader; when
// the term ends the label goes, and the next leader's Pod gets it. A Pod
// that kept the label from a process before (a restarted container)
// loses it when the labeller starts. The user may get, create and update
// leases, and get and patch pods: the Role in deploy/kubernetes.
func TestIntegrationPodLabel(t *testing.T) {
	ns := testservers.KubeNamespace(t)
	admin := testservers.KubeClient(t, "admin")
	testservers.KubeLabelRole(t, ns, "alice")
	cs := testservers.KubeClient(t, "alice")
	makePod(t, admin, ns, "job-a", map[string]string{"app": "job"})
	makePod(t, admin, ns, "job-b", map[string]string{"app": "job", k8slease.LeaderLabel: "true"}) // left by a run before
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job-leader"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "job", k8slease.LeaderLabel: "true"},
		Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := admin.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	store := newStore(t, "alice", ns)
	start := func(pod string) func() {
		label, err := k8slease.NewPodLabel(context.Background(), cs.CoreV1(), types.NamespacedName{Namespace: ns, Name: pod}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var cb tenure.Callbacks
		cb.OnElected, cb.OnDemoted = label.Wrap(nil, nil)
		c, err := tenure.New(tenure.Config{Lease: "job", Store: store, Timing: tenure.Timing{LeaseDuration: 3 * time.Second},
			Runtime: tenure.Runtime{ID: pod}, Callbacks: cb})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("%s: Run: %v", pod, err)
				}
			})
		}
		t.Cleanup(stop) // also when the test fails before it stops it
		return stop
	}
	stopA := start("job-a")
	awaitLeaders(t, admin, ns, "job-a", "job-b") // b's label is stale until b starts
	start("job-b")
	if got := leaders(t, admin, ns); !slices.Equal(got, []string{"job-a"}) {
		t.Fatalf("with job-b following: labelled %v, want [job-a]", got)
	}
	stopA() // a's label is off by the time Run returns; b takes over
	if got := leaders(t, admin, ns); slices.Contains(got, "job-a") {
		t.Fatalf("after job-a stopped: labelled %v", got)
	}
	awaitLeaders(t, admin, ns, "job-b")
}

// A Role without patch on pods fails NewPodLabel, saying what to grant.
func TestIntegrationPodLabelRBAC(t *testing.T) {
	ns := testservers.KubeNamespace(t)
	testservers.KubeGrant(t, ns, "bob", "get", "create", "update")
	makePod(t, testservers.KubeClient(t, "admin"), ns, "job-a", nil)
	_, err := k8slease.NewPodLabel(context.Background(), testservers.KubeClient(t, "bob").CoreV1(), types.NamespacedName{Namespace: ns, Name: "job-a"}, nil)
	if err == nil || !strings.Contains(err.Error(), `cannot patch resource "pods"`) || !strings.Contains(err.Error(), "get and patch on pods") {
		t.Fatalf("NewPodLabel without patch: %v", err)
	}
}
