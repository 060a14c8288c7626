package servers

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("TENURE_CACHE", "/tmp/c")
	t.Setenv("TENURE_SERVERS", "minio, dynamodb")
	t.Setenv("TENURE_SERVER_TIMEOUT", "7")
	c, err := FromEnv(io.Discard)
	if err != nil || strings.Join(c.Servers, " ") != "minio dynamodb" || c.Timeout.Seconds() != 7 || c.Cache != "/tmp/c" {
		t.Fatalf("FromEnv = %+v, %v", c, err)
	}
	for k, v := range map[string]string{"TENURE_SERVERS": "mysql", "TENURE_SERVER_TIMEOUT": "soon"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, v)
			if _, err := FromEnv(io.Discard); err == nil || !strings.Contains(err.Error(), k) && !strings.Contains(err.Error(), v) {
				t.Fatalf("%s=%s: %v", k, v, err)
			}
		})
	}
}

func tgz(t *testing.T, files map[string]string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	return b.Bytes()
}

func TestUntar(t *testing.T) {
	dir := t.TempDir()
	if err := untar(tgz(t, map[string]string{"package/lib/a.jar": "jar"}), dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "package/lib/a.jar")); err != nil || string(b) != "jar" {
		t.Fatalf("unpacked %q, %v", b, err)
	}
	for _, bad := range []string{"../evil", "/etc/evil"} {
		if err := untar(tgz(t, map[string]string{bad: "x"}), dir); err == nil {
			t.Errorf("untar accepted %q", bad)
		}
	}
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v", ports)
		}
		seen[p] = true
	}
}
