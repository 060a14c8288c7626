package storeurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tenure-go/tenure/internal/kube"
	"github.com/tenure-go/tenure/lease"
)

// openK8s opens k8s://NAMESPACE: the Pod's ServiceAccount in a cluster,
// else a kubeconfig (kubeconfig=PATH, else $KUBECONFIG or ~/.kube/config,
// as kubectl finds it), at its current context or context=NAME.
func openK8s(u *url.URL, q url.Values) (lease.Store, error) {
	if err := only(q, "kubeconfig", "context"); err != nil {
		return nil, err
	}
	ns := u.Host
	if ns == "" || u.Opaque != "" {
		return nil, errors.New("want k8s://NAMESPACE")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("k8s://%s%s: a Kubernetes store has no path: the Leases are in the namespace, named after the leases", ns, u.Path)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 { // before a kubeconfig is looked for
		return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	cfg, err := kube.RESTConfig(q.Get("kubeconfig"), q.Get("context"))
	if err != nil {
		return nil, err
	}
	// The API server's priority and fairness limits what it serves; a
	// client-side token bucket (client-go's default: 5 a second) would
	// only hold renewals back, unseen, past their deadlines.
	cfg.QPS = -1
	cfg.UserAgent = "tenure"
	// HTTP/1.1: a call that times out closes its connection, and the next
	// dials a new one. Over HTTP/2 every call shares one connection, and a
	// half-open one (a NAT or firewall forgot it) fails them all until
	// client-go's health check gives up on it, 45s at its defaults: past
	// any lease.
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	// The light client: a Clientset would link every API group's types
	// into the binary (lease/k8slease.New takes one, for programs that
	// have it).
	client, err := kube.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return kube.NewStore(client.Leases(ns), ns, client.Namespace(ns))
}
