package storeurl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
	"github.com/tenure-go/tenure/lease/filelease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
	"github.com/tenure-go/tenure/lease/s3lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

func TestBadURLs(t *testing.T) {
	for raw, want := range map[string]string{
		"":                            "no scheme",
		"/var/lib/tenure":             "no scheme",
		"redis://":                    "want redis://HOST:PORT",
		"redis://h:1?cluster=maybe":   `cluster="maybe": want true or false`,
		"redis://h:1?poolsize=3":      "tenure's own: prefix, cluster, master_name",
		"memcached://x":               `unknown scheme "memcached"`,
		"nats://h:1":                  "want nats://HOST:PORT/BUCKET",
		"nats://h:1/b?replicas=2":     "want 1, 3 or 5",
		"nats://h:1/b?history=3":      `unknown parameter "history"`,
		"file://host/dir":             "three slashes",
		"file://":                     "no directory",
		"file:///tmp/x?sync=false":    `unknown parameter "sync"`,
		"mem:?x=1":                    `unknown parameter "x"`,
		"dynamodb://":                 "want dynamodb://TABLE",
		"dynamodb://t/extra":          "want dynamodb://TABLE",
		"dynamodb://tbl?regoin=x":     `unknown parameter "regoin": want one of region, profile, endpoint, create, key`,
		"dynamodb://tbl?create=maybe": `create="maybe": want true or false`,
		"dynamodb://a?region=x":       "table name",
		"dynamodb://t?region=x&endpoint=127.0.0.1:8000": "needs http:// or https://",
		"s3://":                      "want s3://BUCKET/PREFIX",
		"s3://b/p?path-style=2":      `path-style="2": want true or false`,
		"s3://Bad_Bucket?region=x":   "Config.Bucket",
		"file:///tmp/x?shared=maybe": `shared="maybe": want true or false`,
		"s3://bucket/p?endpoint=http://127.0.0.1:1&acl=x":  `unknown parameter "acl"`,
		"postgres://h/db?create=maybe":                     `create="maybe": want true or false`,
		"postgres://h/db?table=a-b":                        "pglease: table",
		"etcd:///p":                                        "want etcd://HOST:PORT/PREFIX",
		"etcd://h:1/p?timeout=1":                           `unknown parameter "timeout"`,
		"etcd://h:1/p?cert=/c.pem":                         "cert= and key= go together",
		"gs://":                                            "want gs://BUCKET/PREFIX",
		"gs://b/p?endpoint=http://127.0.0.1:1&create=true": "project=ID",
		"azblob://acct":                                    "want azblob://ACCOUNT/CONTAINER/PREFIX",
		"azblob://acct/c?tier=hot":                         `unknown parameter "tier"`,
	} {
		_, err := storeurl.Open(t.Context(), raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", raw, err, want)
		}
	}
}

// TestPasswordRedacted: an error about a URL never repeats its password.
func TestPasswordRedacted(t *testing.T) {
	for _, raw := range []string{"postgres://u:s3cret@h/db?create=maybe", "etcd://u:s3cret@h:1/p?cert=x"} {
		_, err := storeurl.Open(t.Context(), raw)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v: want an error without the password", raw, err)
		}
	}
	if got := storeurl.Redact("postgres://u:s3cret@h/db"); got != "postgres://u:xxxxx@h/db" {
		t.Errorf("Redact = %q", got)
	}
}

// TestRegionRequired: with no region in the URL nor in the SDK's chain, an
// AWS store is refused, not quietly put in us-east-1.
func TestRegionRequired(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	for _, raw := range []string{"dynamodb://t", "s3://bucket/p"} {
		if _, err := storeurl.Open(t.Context(), raw); err == nil || !strings.Contains(err.Error(), "no AWS region") {
			t.Errorf("Open(%q) = %v, want no AWS region", raw, err)
		}
	}
}

// TestFileStoreOwnership: a directory others can write is refused as a
// permanent error, unless shared=true says it is shared on purpose.
func TestFileStoreOwnership(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := storeurl.Open(t.Context(), "file://"+filepath.ToSlash(dir)); !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable directory: %v", err)
	}
	if _, err := storeurl.Open(t.Context(), "file://"+filepath.ToSlash(dir)+"?shared=true"); err != nil {
		t.Errorf("shared=true: %v", err)
	}
}

func TestStores(t *testing.T) {
	dir := t.TempDir()
	for raw, check := range map[string]func(lease.Store) bool{
		"mem:":                               func(s lease.Store) bool { _, ok := s.(*memlease.Store); return ok },
		"file://" + filepath.ToSlash(dir):    func(s lease.Store) bool { f, ok := s.(*filelease.Store); return ok && f.Dir() == dir },
		"file:" + filepath.ToSlash(dir):      func(s lease.Store) bool { f, ok := s.(*filelease.Store); return ok && f.Dir() == dir },
		"dynamodb://leases?region=eu-west-1": func(s lease.Store) bool { _, ok := s.(*dynamolease.Store); return ok },
		"s3://leases/prod/?region=eu-west-1": func(s lease.Store) bool { _, ok := s.(*s3lease.Store); return ok },
	} {
		s, err := storeurl.Open(t.Context(), raw)
		if err != nil || !check(s) {
			t.Errorf("Open(%q) = %T, %v", raw, s, err)
		}
	}
}

// TestMemStoresByName: mem:NAME is one store per name in the process.
func TestMemStoresByName(t *testing.T) {
	a1, _ := storeurl.Open(t.Context(), "mem:a")
	a2, _ := storeurl.Open(t.Context(), "mem:a")
	b, _ := storeurl.Open(t.Context(), "mem:b")
	if a1 != a2 || a1 == b {
		t.Fatalf("mem:a twice gave %p and %p, mem:b %p", a1, a2, b)
	}
}

func TestFileStoreConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store {
		s, err := storeurl.Open(t.Context(), "file://"+filepath.ToSlash(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestIntegrationStoreURL opens each real server by URL, the way the
// README and the tenure command do (credentials from the environment,
// create=true), and runs the conformance suite on it.
func TestIntegrationStoreURL(t *testing.T) {
	t.Run("dynamodb-local", func(t *testing.T) {
		testservers.DynamoDB(t) // skips, or fails under CI, without the server
		t.Setenv("AWS_ACCESS_KEY_ID", "tenure")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "tenure")
		raw := "dynamodb://" + testservers.UniqueName("tenure-url") + "?region=us-east-1&create=true&endpoint=" + os.Getenv(testservers.EnvDynamoDBEndpoint)
		conformance(t, raw, false)
	})
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
			bucket := testservers.NewBucket(t, srv.Client()) // deleted at cleanup
			// MinIO ignores If-Match on DeleteObject (see s3lease.Store.Delete).
			conformance(t, "s3://"+bucket+"/tenure/?region=us-east-1&create=true&endpoint="+srv.Endpoint, srv.Name == "minio")
		})
	}
	t.Run("postgres", func(t *testing.T) {
		table := strings.ReplaceAll(testservers.UniqueName("tenure_url"), "-", "_")
		conformance(t, testservers.Postgres(t)+"&create=true&table="+table, false)
	})
	t.Run("etcd", func(t *testing.T) {
		conformance(t, "etcd://"+testservers.Etcd(t)+"/"+testservers.UniqueName("tenure-url")+"/", false)
	})
	t.Run("gcs", func(t *testing.T) {
		conformance(t, "gs://"+testservers.UniqueName("tenure-url")+"/tenure/?create=true&project=test&endpoint="+testservers.GCS(t), false)
	})
	t.Run("azblob", func(t *testing.T) {
		srv := testservers.Azurite(t)
		t.Setenv("AZURE_STORAGE_KEY", srv.Key)
		conformance(t, "azblob://"+srv.Account+"/"+testservers.UniqueName("tenure-url")+"/tenure/?create=true&endpoint="+srv.Endpoint, false)
	})
	t.Run("k8s", func(t *testing.T) {
		ns := testservers.KubeNamespace(t)
		testservers.KubeGrant(t, ns, "alice", "get", "list", "watch", "create", "update", "delete")
		conformance(t, "k8s://"+ns+"?context=test&kubeconfig="+testservers.KubeConfigFile(t, "alice"), false)
	})
	t.Run("nats", func(t *testing.T) {
		conformance(t, testservers.NATS(t)+"/"+strings.ReplaceAll(testservers.UniqueName("tenure-url"), ".", "_")+"?create=true", false)
	})
	t.Run("redis", func(t *testing.T) {
		conformance(t, testservers.Redis(t)+"?prefix="+testservers.UniqueName("tenure-url")+":", false)
	})
	t.Run("k8s-env", func(t *testing.T) { // as kubectl finds it: $KUBECONFIG, its current context
		ns := testservers.KubeNamespace(t)
		t.Setenv("KUBECONFIG", testservers.KubeConfigFile(t, "admin"))
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		conformance(t, "k8s://"+ns, false)
	})
}

// TestK8sURLs: a k8s:// URL that cannot work is refused at Open, saying
// what to write.
func TestK8sURLs(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c}\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		"k8s://":                         "want k8s://NAMESPACE",
		"k8s:jobs":                       "want k8s://NAMESPACE",
		"k8s://jobs/nightly":             "has no path",
		"k8s://Jobs":                     "namespace \"Jobs\"",
		"k8s://jobs?ns=x":                "unknown parameter \"ns\"",
		"k8s://jobs":                     "add kubeconfig=PATH, or set KUBECONFIG",
		"k8s://jobs?kubeconfig=/no/such": "no such file",
		"k8s://jobs?kubeconfig=" + kubeconfig + "&context=prod": `context "prod" does not exist`,
	} {
		if _, err := storeurl.Open(t.Context(), raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error saying %q", raw, err, want)
		}
	}
	if _, err := storeurl.Open(t.Context(), "k8s://jobs?kubeconfig="+kubeconfig); err != nil {
		t.Errorf("Open with a kubeconfig: %v", err)
	}
}

// TestIntegrationEtcdLogin: etcd's login happens at the first call, so a
// wrong password there is a permanent error, and a cluster that does not
// answer is not.
func TestIntegrationEtcdLogin(t *testing.T) {
	s, err := storeurl.Open(t.Context(), "etcd://tenure:wrong@"+testservers.EtcdAuth(t)+"/tenure/")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(t.Context(), "x"); !errors.Is(err, lease.ErrPermanent) {
		t.Errorf("Get with a login the server refuses: %v, want a permanent error", err)
	}
	s, err = storeurl.Open(t.Context(), "etcd://tenure:pw@127.0.0.1:1/tenure/")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, _, err := s.Get(ctx, "x"); err == nil || errors.Is(err, lease.ErrPermanent) {
		t.Errorf("Get from a closed port: %v, want an error that is not permanent", err)
	}
}

func conformance(t *testing.T, raw string, unconditionalDelete bool) {
	s, err := storeurl.Open(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if unconditionalDelete {
		s = leasetest.UnconditionalDelete(s)
	}
	leasetest.Run(t, func(*testing.T) lease.Store { return s })
}

// TestIntegrationMissingBucketIsPermanent: a store URL naming a bucket that
// does not exist fails at once with a permanent error, instead of retrying.
func TestIntegrationMissingBucketIsPermanent(t *testing.T) {
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
			s, err := storeurl.Open(t.Context(), "s3://"+testservers.UniqueName("nobucket")+"?region=us-east-1&endpoint="+srv.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = s.Get(t.Context(), "a")
			if !errors.Is(err, lease.ErrPermanent) {
				t.Fatalf("Get on a missing bucket: %v, want a permanent error", err)
			}
		})
	}
}
