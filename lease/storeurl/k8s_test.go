package storeurl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// TestIntegrationKubeSilentConnection: the API server's connections go
// silent (a NAT or firewall forgot them: no FIN, no RST; new connections
// pass) under a leader on a 2s lease. A call that times out must not leave
// the store on the dead connection: the leader's next renewal goes out on
// a new one, so that someone leads again within the lease and two op
// timeouts (over one HTTP/2 connection, every call failed for 45s).
func TestIntegrationKubeSilentConnection(t *testing.T) {
	rc := testservers.Kube(t, "admin")
	ns := testservers.KubeNamespace(t)
	proxy := testservers.NewProxy(t, rc.Host[len("https://"):])
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://%s', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: '%s'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n",
		proxy.Addr(), rc.BearerToken)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := storeurl.Open(t.Context(), "k8s://"+ns+"?kubeconfig="+kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	timing := tenure.Timing{LeaseDuration: 2 * time.Second}
	elected := make(chan struct{}, 8)
	c, err := tenure.New(tenure.Config{Lease: "silent", Store: store, Timing: timing, Callbacks: tenure.Callbacks{
		OnElected: func(context.Context, tenure.Term) { elected <- struct{}{} },
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	select {
	case <-elected:
	case <-time.After(30 * time.Second):
		t.Fatal("not elected within 30s")
	}
	proxy.Silence()
	silent := time.Now()
	bound := timing.WithDefaults().LeaseDuration + 2*timing.WithDefaults().OpTimeout
	// Leading at the bound: still (its renewals went out on new
	// connections) or again.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var led time.Duration
	for range tick.C {
		since := time.Since(silent)
		if since > bound+time.Second {
			break
		}
		if c.Status().Leading {
			led = since
		}
	}
	if led < bound {
		t.Fatalf("after the connections went silent, the candidate last led %v in; want it leading %v on (the lease and two op timeouts); status %+v", led.Round(time.Millisecond), bound, c.Status())
	}
}
