package benchkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tenure-go/tenure/internal/testservers/servers"
	"github.com/tenure-go/tenure/lease/k8slease"
)

// KubeStoreURL returns k8s://NAMESPACE?kubeconfig=FILE for a new namespace
// on the kube-apiserver at $TENURE_KUBE_URL (scripts/testservers.sh),
// reached as its admin; done deletes the namespace and the file.
func KubeStoreURL() (_ string, done func(), err error) {
	server := os.Getenv("TENURE_KUBE_URL")
	if server == "" {
		return "", nil, fmt.Errorf("TENURE_KUBE_URL is not set: run under scripts/testservers.sh run --")
	}
	dir, err := os.MkdirTemp("", "tenure-bench-kube")
	if err != nil {
		return "", nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: servers.KubeAdminToken}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "admin"}
	cfg.CurrentContext = "bench"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	rc, err := k8slease.RESTConfig(path, "")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ns := fmt.Sprintf("bench-%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	done = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		os.RemoveAll(dir)
	}
	return "k8s://" + ns + "?kubeconfig=" + url.QueryEscape(path), done, nil
}

// Client returns the namespace of a k8s:// store URL and a client of its
// API server, whose requests c counts.
func (c *HTTPCount) Client(storeURL string) (ns string, cs *kubernetes.Clientset, err error) {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "k8s" {
		return "", nil, fmt.Errorf("%q: want k8s://NAMESPACE?kubeconfig=FILE", storeURL)
	}
	cfg, err := k8slease.RESTConfig(u.Query().Get("kubeconfig"), u.Query().Get("context"))
	if err != nil {
		return "", nil, err
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, c} })
	cs, err = kubernetes.NewForConfig(cfg)
	return u.Host, cs, err
}

// HTTPCount counts the requests of an API client: GETs as reads, the rest
// as writes.
type HTTPCount struct{ Gets, Puts atomic.Int64 }

type countingRT struct {
	rt http.RoundTripper
	c  *HTTPCount
}

func (r countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		r.c.Gets.Add(1)
	} else {
		r.c.Puts.Add(1)
	}
	return r.rt.RoundTrip(req)
}
