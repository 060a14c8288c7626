package servers

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kube-apiserver is built from the Go module proxy: k8s.io/kubernetes at
// kubeVersion, its staging modules pinned by replace (kube/go.mod.txt,
// written out as the build module's go.mod). It runs over a Debian etcd of
// its own, with static tokens and RBAC.
const kubeVersion = "v1.37.2"

var (
	//go:embed kube/go.mod.txt
	kubeGoMod []byte
	//go:embed kube/go.sum.txt
	kubeGoSum []byte
	//go:embed kube/tools.go.txt
	kubeTools []byte
)

// The API server's users: KubeAdmin is in system:masters; the others have
// no rights until a test binds them a Role.
const (
	KubeAdminToken = "tenure-kube-admin"
	kubeUsers      = "alice bob carol"
)

// KubeToken is the static token of one of the users the API server knows.
func KubeToken(user string) string { return "tenure-kube-" + user }

func (c Config) kubeHome() string { return filepath.Join(c.Cache, "kube-apiserver-"+kubeVersion) }

// installKube builds kube-apiserver into the cache.
func (c Config) installKube() error {
	home := c.kubeHome()
	stamp := "k8s.io/kubernetes@" + kubeVersion
	if _, err := os.Stat(filepath.Join(home, "bin", "kube-apiserver")); err == nil && stampOK(home, stamp) {
		return nil
	}
	start := time.Now()
	c.say("building kube-apiserver %s from the Go module proxy (about 8 minutes on 2 cores, once)", kubeVersion)
	tmp, err := c.scratch("kube-apiserver")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{"go.mod": kubeGoMod, "go.sum": kubeGoSum, "tools.go": kubeTools} {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return err
		}
	}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	// Stripped, and compiled without DWARF (a tenth of the compiler's time).
	if err := run(src, env, "go", "build", "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags=-s -w", "-o", filepath.Join(tmp, "bin", "kube-apiserver"), "k8s.io/kubernetes/cmd/kube-apiserver"); err != nil {
		return err
	}
	if err := os.RemoveAll(src); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		return err
	}
	if err := commit(tmp, home); err != nil {
		return err
	}
	c.say("built kube-apiserver %s in %.0fs", kubeVersion, time.Since(start).Seconds())
	return nil
}

// startKube runs kube-apiserver on port over an etcd of its own (ports
// etcdPort and etcdPeer): serving certificates it makes itself, a key for
// service account tokens made here, static tokens, RBAC, and no controllers
// (so no endpoint reconciler and no ServiceAccount admission).
func (s *Set) startKube(port, etcdPort, etcdPeer string) error {
	if err := s.startEtcd("kube-etcd", etcdPort, etcdPeer, nil); err != nil {
		return err
	}
	dir := filepath.Join(s.State, "kube")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	tokens := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", KubeAdminToken)
	for _, u := range strings.Fields(kubeUsers) {
		tokens += fmt.Sprintf("%s,%s,%s\n", KubeToken(u), u, u)
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(tokens),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	_, err = s.launch("kube-apiserver", kubeReady(port), "", nil, nil, filepath.Join(s.cfg.kubeHome(), "bin", "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:"+etcdPort, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+port, "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=RBAC",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none", "--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false", "-v=0")
	return err
}

// kubeReady reports whether the API server answers /readyz to the admin.
func kubeReady(port string) func() bool {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // its own self-signed certificate, on loopback
	}}
	return func() bool {
		req, err := http.NewRequest("GET", "https://127.0.0.1:"+port+"/readyz", nil)
		if err != nil {
			return false
		}
		req.Header.Set("Authorization", "Bearer "+KubeAdminToken)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// writeKubeconfig writes STATE/kubeconfig: the API server at url as the
// admin (system:masters), for kubectl and tenure's k8s:// URLs
// (kubeconfig=PATH, or KUBECONFIG), and returns its path.
func (s *Set) writeKubeconfig(url string) (string, error) {
	path := filepath.Join(s.State, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tenure-test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: tenure-test
  context:
    cluster: tenure-test
    user: admin
current-context: tenure-test
`, url, KubeAdminToken)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}
