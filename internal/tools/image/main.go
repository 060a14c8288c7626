// Command image builds the container image of tenure without a container
// daemon: one layer holding a static tenure binary at /tenure, on an empty
// base, its entrypoint, run as an unprivileged user; written as a tarball
// that docker load, podman load, kind load image-archive and crane push
// take. make image runs it:
//
//	CGO_ENABLED=0 GOOS=linux go build -trimpath -o bin/tenure-linux-amd64 ./cmd/tenure
//	go run ./internal/tools/image -bin bin/tenure-linux-amd64 -arch amd64 -tag tenure:v1.2.3 -o bin/tenure-image.tar
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Entrypoint is where the binary is in the image, and what runs.
const Entrypoint = "/tenure"

// User is the image's user: the conventional unprivileged "nonroot" (no
// /etc/passwd is needed for a numeric one).
const User = "65532:65532"

func main() {
	bin := flag.String("bin", "", "the static tenure binary for linux (CGO_ENABLED=0 go build)")
	arch := flag.String("arch", "amd64", "its GOARCH")
	tag := flag.String("tag", "tenure:latest", "the image's name and tag in the tarball")
	out := flag.String("o", "tenure-image.tar", "the tarball to write")
	flag.Parse()
	if err := buildImage(*bin, *arch, *tag, *out); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

// buildImage writes the image of bin to out.
func buildImage(bin, arch, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	if err := static(bin); err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	// A fixed time: the same binary makes the same image.
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: Entrypoint[1:], Mode: 0o755, Size: int64(len(exe)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(exe); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.User = User
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.title": "tenure", "org.opencontainers.image.version": ref.TagStr()}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// static checks that bin is a Linux executable that needs no dynamic
// loader: the image has no libc for one.
func static(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s: %w (want a Linux binary: GOOS=linux)", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New(bin + " is linked dynamically: build it with CGO_ENABLED=0")
		}
	}
	return nil
}
