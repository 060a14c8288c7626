package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client is a light client of the API server: Leases of
// coordination.k8s.io/v1, namespaces and Pods' labels, on client-go's rest
// client with a scheme of Leases alone. It is what the typed Clientset
// would do for these calls, without the scheme of every API group.
type Client struct{ rc *rest.RESTClient }

// codecs is the scheme of the light client: Leases, and the options and
// statuses of package meta/v1. Made on first use, so that a process that
// never talks to Kubernetes spends nothing on it.
var codecs = sync.OnceValues(func() (serializer.CodecFactory, runtime.ParameterCodec) {
	s := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(s); err != nil {
		panic(err) // a static registration: not reached
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s), runtime.NewParameterCodec(s)
})

// NewClient returns a Client for cfg (RESTConfig's, say); cfg is not
// changed.
func NewClient(cfg *rest.Config) (*Client, error) {
	c := rest.CopyConfig(cfg)
	cf, _ := codecs()
	c.GroupVersion = &coordinationv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = cf.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &Client{rc: rc}, nil
}

// Leases returns the Leases of namespace ns.
func (c *Client) Leases(ns string) Leases { return leases{c.rc, ns} }

// Namespace returns what asks the API server for namespace ns: nil if it
// exists, its error (404, 403...) otherwise.
func (c *Client) Namespace(ns string) func(context.Context) error {
	return func(ctx context.Context) error {
		return c.rc.Get().AbsPath("/api/v1/namespaces", ns).Do(ctx).Error()
	}
}

type leases struct {
	rc *rest.RESTClient
	ns string
}

func (l leases) params() runtime.ParameterCodec { _, p := codecs(); return p }

func (l leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := new(coordinationv1.Lease)
	err := l.rc.Get().Namespace(l.ns).Resource("leases").Name(name).VersionedParams(&opts, l.params()).Do(ctx).Into(out)
	return out, err
}

func (l leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := new(coordinationv1.Lease)
	err := l.rc.Post().Namespace(l.ns).Resource("leases").VersionedParams(&opts, l.params()).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := new(coordinationv1.Lease)
	err := l.rc.Put().Namespace(l.ns).Resource("leases").Name(lease.Name).VersionedParams(&opts, l.params()).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l leases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return l.rc.Delete().Namespace(l.ns).Resource("leases").Name(name).Body(&opts).Do(ctx).Error()
}

func (l leases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := new(coordinationv1.LeaseList)
	err := l.rc.Get().Namespace(l.ns).Resource("leases").VersionedParams(&opts, l.params()).Do(ctx).Into(out)
	return out, err
}

func (l leases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return l.rc.Get().Namespace(l.ns).Resource("leases").VersionedParams(&opts, l.params()).Watch(ctx)
}

// Patch applies a JSON merge patch to a Pod.
func (c *Client) Patch(ctx context.Context, pod types.NamespacedName, patch []byte) error {
	return c.rc.Patch(types.MergePatchType).AbsPath("/api/v1/namespaces", pod.Namespace, "pods", pod.Name).Body(patch).Do(ctx).Error()
}

// Labels returns a Pod's labels.
func (c *Client) Labels(ctx context.Context, pod types.NamespacedName) (map[string]string, error) {
	raw, err := c.rc.Get().AbsPath("/api/v1/namespaces", pod.Namespace, "pods", pod.Name).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var p struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("pod %s: %w", pod, err)
	}
	return p.Metadata.Labels, nil
}

// RESTConfig returns the configuration of a client of the API server: in a
// Pod, with neither kubeconfig nor kubecontext given, its ServiceAccount's
// (rest.InClusterConfig); otherwise a kubeconfig as kubectl reads it (the
// file kubeconfig, else $KUBECONFIG, else ~/.kube/config) at its current
// context or kubecontext.
func RESTConfig(kubeconfig, kubecontext string) (*rest.Config, error) {
	if kubeconfig == "" && kubecontext == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w (is a ServiceAccount token mounted? automountServiceAccountToken must not be false)", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, then ~/.kube/config
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext}).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("no Kubernetes configuration: not in a Pod (KUBERNETES_SERVICE_HOST is unset), and no kubeconfig: add kubeconfig=PATH, or set KUBECONFIG")
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
