//go:build linux

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/internal/testservers/servers"
)

// onServerStores runs f on each store beyond AWS, on its real server:
// PostgreSQL, etcd, fake-gcs-server, Azurite, kube-apiserver, Redis and
// NATS, each with a table, prefix, bucket, container or namespace of its own, made by
// create=true where the store has it. On Kubernetes the user has the Role
// the docs give: get, list, watch, create and update on leases.
func onServerStores(t *testing.T, f func(t *testing.T, e *procEnv)) {
	t.Run("postgres", func(t *testing.T) {
		table := strings.ReplaceAll(testservers.UniqueName("tenure_cli"), "-", "_")
		f(t, newProcEnv(t, testservers.Postgres(t)+"&create=true&table="+table))
	})
	t.Run("etcd", func(t *testing.T) {
		f(t, newProcEnv(t, "etcd://"+testservers.Etcd(t)+"/"+testservers.UniqueName("tenure-cli")+"/"))
	})
	t.Run("gcs", func(t *testing.T) {
		bucket := testservers.UniqueName("tenure-cli")
		f(t, newProcEnv(t, "gs://"+bucket+"/tenure/?create=true&project=test&endpoint="+testservers.GCS(t)))
	})
	t.Run("azblob", func(t *testing.T) {
		srv := testservers.Azurite(t)
		cont := testservers.UniqueName("tenure-cli")
		f(t, newProcEnv(t, "azblob://"+srv.Account+"/"+cont+"/tenure/?create=true&endpoint="+srv.Endpoint, "AZURE_STORAGE_KEY="+srv.Key))
	})
	t.Run("k8s", func(t *testing.T) { f(t, kubeProcEnv(t)) })
	t.Run("redis", func(t *testing.T) {
		f(t, newProcEnv(t, testservers.Redis(t)+"?prefix="+testservers.UniqueName("tenure-cli")+":"))
	})
	t.Run("nats", func(t *testing.T) {
		f(t, newProcEnv(t, testservers.NATS(t)+"/"+strings.ReplaceAll(testservers.UniqueName("tenure-cli"), ".", "_")+"?create=true"))
	})
}

// kubeProcEnv is a procEnv on the API server, in a namespace of its own,
// as a user with the Role the docs give.
func kubeProcEnv(t *testing.T) *procEnv {
	ns := testservers.KubeNamespace(t)
	testservers.KubeGrant(t, ns, "alice", "get", "list", "watch", "create", "update")
	return newProcEnv(t, "k8s://"+ns+"?kubeconfig="+testservers.KubeConfigFile(t, "alice"))
}

// TestProcessServerStores: on each store beyond AWS, tenure lock runs its
// command with a token, status and list show the holder, a second lock
// waits, and kill -9 of the holder hands the lock to the waiter within
// the failover bound, at a higher token.
func TestProcessServerStores(t *testing.T) {
	onServerStores(t, func(t *testing.T, e *procEnv) {
		tool := func(args ...string) (int, string) {
			t.Helper()
			cmd := exec.Command(tenureBinary(t), args...)
			cmd.Env = append(append(os.Environ(), e.env...), "TENURE_STORE="+e.store)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode(), string(out)
			} else if err != nil {
				t.Fatal(err)
			}
			return 0, string(out)
		}
		a := e.tenure("lock", "--id", "a", "job")
		first := e.await(20*time.Second, "a's child", func(ev event) bool { return ev.what == "start" && ev.holder == "a" })
		if code, out := tool("status", "job"); code != 0 || !strings.Contains(out, `held by "a"`) {
			t.Errorf("status: %d %s", code, out)
		}
		if code, out := tool("list"); code != 0 || !strings.Contains(out, `job: held by "a"`) {
			t.Errorf("list: %d %s", code, out)
		}
		e.tenure("lock", "--id", "b", "job")
		e.killFailsOver(a, first, "b's child", func(ev event) bool { return ev.what == "start" && ev.holder == "b" })
	})
}

// TestProcessServerStoresRefuse: a table, bucket or container that does
// not exist, or a key the service refuses, ends tenure lock at once with
// status 69, saying what to do.
func TestProcessServerStoresRefuse(t *testing.T) {
	srv := testservers.Azurite(t)
	cases := []struct {
		name, store, env, want string
	}{
		{"postgres", testservers.Postgres(t) + "&table=no_such_table", "", "create=true"},
		{"etcd-password", "etcd://tenure:wrong@" + testservers.EtcdAuth(t) + "/tenure/", "", "check the user name and password"},
		{"etcd-rights", "etcd://tenure@" + testservers.EtcdAuth(t) + "/tenure/", "TENURE_ETCD_PASSWORD=" + servers.EtcdTenurePassword, "grant-permission"},
		{"gcs", "gs://no-such-bucket/tenure/?endpoint=" + testservers.GCS(t), "", "bucket does not exist"},
		{"azblob", "azblob://" + srv.Account + "/no-such-container/?endpoint=" + srv.Endpoint, "AZURE_STORAGE_KEY=" + srv.Key, "container does not exist"},
		{"azblob-key", "azblob://" + srv.Account + "/no-such-container/?endpoint=" + srv.Endpoint, "AZURE_STORAGE_KEY=d3Jvbmc=", "check the credentials"},
		{"redis-password", strings.Replace(testservers.Redis(t), "redis://", "redis://nobody:wrong@", 1), "", "check the user name and password"},
		{"nats-bucket", testservers.NATS(t) + "/no_such_bucket", "", "create=true"},
	}
	for _, s3 := range testservers.S3Servers(t) { // with create=true, CreateBucket is what the key is refused on
		cases = append(cases, struct{ name, store, env, want string }{s3.Name + "-key",
			"s3://" + testservers.UniqueName("tenure-cli") + "/?region=us-east-1&create=true&endpoint=" + s3.Endpoint,
			"AWS_ACCESS_KEY_ID=" + s3.AccessKey + " AWS_SECRET_ACCESS_KEY=wrong", "create bucket"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(tenureBinary(t), "lock", "--store", c.store, "x", "--", "true")
			cmd.Env = append(os.Environ(), strings.Fields(c.env)...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != exitUnavailable || !strings.Contains(string(out), c.want) {
				t.Errorf("%v\n%s\nwant exit %d saying %q", err, out, exitUnavailable, c.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("exit after %v; want it at once", took)
			}
		})
	}
}
