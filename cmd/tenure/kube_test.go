//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenure-go/tenure/internal/testservers"
)

// Tests of tenure on Kubernetes, against the kube-apiserver that
// scripts/testservers.sh starts (TestProcessServerStores/k8s is with the
// other stores).

// TestProcessKubeRBAC: on Kubernetes, tenure run as a user whose Role
// lacks a verb it needs ends with status 69, naming the verb and the
// resource: without get at once, without update at its first renewal
// (create took the lease), its command stopped. carol has no Role.
func TestProcessKubeRBAC(t *testing.T) {
	ns := testservers.KubeNamespace(t)
	testservers.KubeGrant(t, ns, "bob", "get", "list", "watch", "create")
	for _, c := range []struct{ user, want string }{
		{"bob", `cannot update resource "leases"`},
		{"carol", `cannot get resource "leases"`},
	} {
		t.Run(c.user, func(t *testing.T) {
			store := "k8s://" + ns + "?kubeconfig=" + testservers.KubeConfigFile(t, c.user)
			cmd := exec.Command(tenureBinary(t), "run", "--store", store, "--lease", "3s", "--id", c.user, "job-"+c.user, "--", "sleep", "60")
			start := time.Now()
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != exitUnavailable || !strings.Contains(string(out), c.want) {
				t.Errorf("%v\n%s\nwant exit %d saying %q", err, out, exitUnavailable, c.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("exit after %v; want it at the first refusal", took)
			}
		})
	}
}

// TestProcessLabelPod: tenure run --label-pod labels its Pod while its
// command runs as the leader, and takes the label off before it exits on
// SIGTERM; the user has the Role of deploy/kubernetes.
func TestProcessLabelPod(t *testing.T) {
	ns := testservers.KubeNamespace(t)
	admin := testservers.KubeClient(t, "admin")
	testservers.KubeLabelRole(t, ns, "alice")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "writer-0"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "tenure"}}}}
	if _, err := admin.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labelled := func() bool {
		p, err := admin.CoreV1().Pods(ns).Get(t.Context(), "writer-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Labels["tenure.dev/leader"] == "true"
	}
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	cmd := exec.Command(tenureBinary(t), "run", "--store", "k8s://"+ns+"?kubeconfig="+testservers.KubeConfigFile(t, "alice"), "--label-pod", "--lease", "3s",
		"writer", "--", "sh", "-c", "touch "+started+"; exec sleep 60")
	cmd.Env = append(os.Environ(), "POD_NAME=writer-0", "POD_NAMESPACE="+ns)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waited := false
	t.Cleanup(func() { // a test that failed first still waits for it
		if !waited {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ok := false; !ok; {
		select {
		case err := <-exited:
			waited = true
			t.Fatalf("tenure run exited: %v\n%s", err, &out)
		case <-tick.C:
			_, err := os.Stat(started)
			ok = err == nil && labelled()
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	waited = true
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("tenure run: %v, want the command's SIGTERM status\n%s", err, &out)
	}
	if labelled() {
		t.Errorf("the Pod is still labelled after tenure run exited\n%s", &out)
	}
}

// TestLabelPodNeedsPod: --label-pod without POD_NAME is a usage error that
// says where the name comes from.
func TestLabelPodNeedsPod(t *testing.T) {
	cmd := exec.Command(tenureBinary(t), "run", "--store", "file://"+t.TempDir(), "--label-pod", "writer", "--", "true")
	cmd.Env = append(os.Environ(), "POD_NAME=", "POD_NAMESPACE=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "Downward API") {
		t.Errorf("%v\n%s\nwant exit %d naming the Downward API", err, out, exitUsage)
	}
}

// TestProcessKubeOperator: what a client-go user meets first. A Lease
// that client-go wrote shows in tenure list as foreign; tenure run on its
// name exits 69 naming the lease once and saying what each way out does; a
// namespace that does not exist is said to be so by status and list too,
// as by run, with status 69; a released Lease shows free to kubectl.
func TestProcessKubeOperator(t *testing.T) {
	ns := testservers.KubeNamespace(t)
	kubeconfig := testservers.KubeConfigFile(t, "admin")
	admin := testservers.KubeClient(t, "admin")
	holder, secs := "controller-7f9c", int32(15)
	now := metav1.NewMicroTime(time.Now())
	if _, err := admin.CoordinationV1().Leases(ns).Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "my-controller"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tool := func(ns string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(tenureBinary(t), args...)
		cmd.Env = append(os.Environ(), "TENURE_STORE=k8s://"+ns+"?kubeconfig="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := tool(ns, "list"); code != 0 || !strings.Contains(out, "my-controller: FOREIGN") || !strings.Contains(out, holder) {
		t.Errorf("list with client-go's Lease: %d %s; want it shown as foreign", code, out)
	}
	code, out := tool(ns, "run", "--lease", "3s", "my-controller", "--", "true")
	if code != exitUnavailable || strings.Count(out, `lease "my-controller"`) > 1 || !strings.Contains(out, "another lease name") || !strings.Contains(out, "deletes it") || strings.Contains(out, "see what holds it") {
		t.Errorf("run on client-go's Lease: %d %s; want 69, the name once, and what each way out does", code, out)
	}
	for _, args := range [][]string{{"status", "job"}, {"list"}, {"run", "job", "--", "true"}} {
		if code, out := tool("no-such-namespace", args...); code != exitUnavailable || !strings.Contains(out, "kubectl create namespace") {
			t.Errorf("%v in a missing namespace: %d %s; want 69 saying to create it", args, code, out)
		}
	}
	if code, out := tool(ns, "lock", "job", "--", "true"); code != 0 {
		t.Fatalf("lock: %d %s", code, out)
	}
	l, err := admin.CoordinationV1().Leases(ns).Get(t.Context(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil {
		t.Errorf("the Lease released by tenure lock has holderIdentity %q: kubectl shows it held", *h)
	}
}
