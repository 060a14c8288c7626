package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestImage builds tenure as make image does (static: CGO_ENABLED=0), and
// reads the tarball back with nothing but archive/tar: its config's
// entrypoint is /tenure, run as a non-root user; its one layer holds that
// file alone, the static binary built, which runs. It leaves out make
// image's -trimpath and -s -w, which change only file names and symbols,
// so that it compiles nothing the process tests' build of tenure and the
// simulator's pass (CGO_ENABLED=0 too) have not compiled already.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tenure")
	build := exec.Command("go", "build", "-o", bin, "../../../cmd/tenure")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "image.tar")
	if err := buildImage(bin, runtime.GOARCH, "tenure:test", out); err != nil {
		t.Fatal(err)
	}

	files := untar(t, must(os.Open(out)))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if !slices.Equal(m.RepoTags, []string{"tenure:test"}) || len(m.Layers) != 1 {
		t.Fatalf("manifest %+v: want the tag tenure:test and one layer", m)
	}
	var cfg struct {
		OS, Architecture string
		Config           struct {
			Entrypoint []string
			User       string
		}
	}
	if err := json.Unmarshal(files[m.Config], &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/tenure"}) || cfg.Config.User == "" || strings.HasPrefix(cfg.Config.User, "0") || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Fatalf("config %+v: want entrypoint /tenure, a non-root user, linux/%s", cfg, runtime.GOARCH)
	}

	zr, err := gzip.NewReader(bytes.NewReader(files[m.Layers[0]]))
	if err != nil {
		t.Fatal(err)
	}
	layer := untar(t, zr)
	if len(layer) != 1 || layer["tenure"] == nil {
		t.Fatalf("layer holds %v, want tenure alone", slices.Collect(maps.Keys(layer)))
	}
	if want := must(os.ReadFile(bin)); !bytes.Equal(layer["tenure"], want) {
		t.Fatal("the layer's /tenure is not the binary built")
	}
	inImage := filepath.Join(dir, "from-image")
	if err := os.WriteFile(inImage, layer["tenure"], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := static(inImage); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(inImage, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), "tenure") {
		t.Fatalf("/tenure version: %v\n%s", err, out)
	}
}

// A binary linked dynamically is refused: the image has no libc.
func TestImageRefusesDynamic(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	err = buildImage(sh, runtime.GOARCH, "tenure:test", filepath.Join(t.TempDir(), "image.tar"))
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("an image of %s: %v, want a refusal naming CGO_ENABLED=0", sh, err)
	}
}

func untar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name] = must(io.ReadAll(tr))
			if h.Name == "tenure" && h.Mode&0o111 == 0 {
				t.Errorf("/tenure has mode %o: not executable", h.Mode)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
