// Package kubernetes_test applies the manifests in this directory to the
// real kube-apiserver that scripts/testservers.sh starts, so that one that
// no longer validates fails make test, and checks that the Role they bind
// is enough for tenure run --label-pod and no more.
package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease/k8slease"
)

// objects reads every object of the manifests here.
func objects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			obj := new(unstructured.Unstructured)
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	return objs
}

// TestIntegrationApply applies the manifests (server-side apply, as
// kubectl apply --server-side does) in a namespace of the test's own, then
// runs a candidate as their ServiceAccount in a Pod made from the
// Deployment's template: it leads, its Pod is labelled, the leader-only
// Service selects that Pod alone, and the Role allows nothing beyond what
// it says.
func TestIntegrationApply(t *testing.T) {
	ctx := context.Background()
	ns := testservers.KubeNamespace(t)
	cfg := testservers.Kube(t, "admin")
	admin := testservers.KubeClient(t, "admin")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(admin.Discovery()))
	var deployment, service *unstructured.Unstructured
	for _, obj := range objects(t) {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		applied, err := dyn.Resource(m.Resource).Namespace(ns).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "tenure-test", Force: new(true), FieldValidation: "Strict"})
		if err != nil {
			t.Fatalf("apply %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		switch {
		case gvk.Kind == "Deployment" && obj.GetName() == "tenure-demo":
			deployment = applied
		case gvk.Kind == "Service" && obj.GetName() == "tenure-demo-leader":
			service = applied
		}
	}
	if deployment == nil || service == nil {
		t.Fatal("the manifests have no Deployment or no Service")
	}
	if n, _, _ := unstructured.NestedInt64(deployment.Object, "spec", "replicas"); n != 3 {
		t.Errorf("replicas %d, want 3", n)
	}

	// No controller runs here: make the Pod the Deployment would.
	var tmpl corev1.PodTemplateSpec
	raw, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	for _, c := range tmpl.Spec.Containers {
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("container %s: probes %+v, %+v; want /livez and /readyz", c.Name, c.LivenessProbe, c.ReadinessProbe)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tenure-demo-0", Labels: tmpl.Labels}, Spec: tmpl.Spec}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// As the ServiceAccount: what tenure run --label-pod does.
	sa := testservers.Kube(t, "admin")
	sa.Impersonate.UserName = "system:serviceaccount:" + ns + ":" + tmpl.Spec.ServiceAccountName
	cs, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	store, err := k8slease.New(cs.CoordinationV1(), k8slease.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	label, err := k8slease.NewPodLabel(ctx, cs.CoreV1(), types.NamespacedName{Namespace: ns, Name: pod.Name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan struct{})
	var cb tenure.Callbacks
	cb.OnElected, cb.OnDemoted = label.Wrap(func(ctx context.Context, _ tenure.Term) { close(elected); <-ctx.Done() }, nil)
	c, err := tenure.New(tenure.Config{Lease: "demo", Store: store, Timing: tenure.Timing{LeaseDuration: 3 * time.Second},
		Runtime: tenure.Runtime{ID: pod.Name}, Callbacks: cb})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-elected:
	case err := <-done:
		t.Fatalf("Run as the ServiceAccount: %v", err)
	}
	selector, _, _ := unstructured.NestedStringMap(service.Object, "spec", "selector")
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testservers.SetupTimeout)
	for {
		pods, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector})})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		if slices.Equal(names, []string{pod.Name}) {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the Service selects %v, want the leader's Pod %s", names, pod.Name)
		}
	}

	// Least privilege: nothing outside the rules.
	for what, err := range map[string]error{
		"list pods":                       errOnly(cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})),
		"get secrets":                     errOnly(cs.CoreV1().Secrets(ns).Get(ctx, "x", metav1.GetOptions{})),
		"delete leases":                   cs.CoordinationV1().Leases(ns).Delete(ctx, "demo", metav1.DeleteOptions{}),
		"get leases of another namespace": errOnly(cs.CoordinationV1().Leases("default").Get(ctx, "demo", metav1.GetOptions{})),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the ServiceAccount: %v, want forbidden", what, err)
		}
	}
}

func errOnly[T any](_ T, err error) error { return err }
