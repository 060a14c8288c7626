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
