//go:build linux

// Command footprint measures what the tenure command weighs: its binary as
// go install builds it (with symbols and DWARF) and as make image builds it
// (static, stripped), and the resident memory of each process of `tenure
// run` supervising a command (tenure, and its supervisor), once settled,
// on each store it is given. docs/performance.md gives the figures.
//
//	scripts/testservers.sh run -- go run ./bench/footprint          # every test server
//	go run ./bench/footprint -stores file                           # the file store alone
//	go run ./bench/footprint -stores 'dynamodb://t?region=eu-west-1' # any store URLs
//
// A store is a URL, or one of file, dynamodb, s3, postgres, etcd, gcs,
// azblob and k8s for the servers scripts/testservers.sh starts (each on a
// table, bucket, container or namespace of its own, made by create=true).
// Memory is VmRSS from /proc (resident pages, file-backed ones included),
// read every -every for -settle once the command runs (the stores at
// once); the maximum is printed.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	stores := flag.String("stores", "file,dynamodb,s3,postgres,etcd,gcs,azblob,k8s", "stores to run on, comma-separated: names of test servers, or URLs")
	settle := flag.Duration("settle", 3*time.Minute, "how long to watch each run's memory once its command runs (the runtime forces a GC every 2 minutes, and the heap grows to its goal meanwhile)")
	every := flag.Duration("every", time.Second, "how often to read it")
	lease := flag.Duration("lease", 3*time.Second, "the lease, so that renewals come within -settle")
	flag.Parse()
	dir, err := os.MkdirTemp("", "footprint")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)

	full, image := filepath.Join(dir, "tenure"), filepath.Join(dir, "tenure-image")
	build(full, nil)
	build(image, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")
	fmt.Printf("binary as go install builds it:  %s\n", size(full))
	fmt.Printf("binary as make image builds it:  %s\n", size(image))
	fmt.Printf("\ntenure run --lease %v supervising sleep; VmRSS, the most over %v once the command runs:\n", *lease, *settle)
	fmt.Printf("%-10s %10s %12s\n", "store", "tenure", "supervisor")
	// The stores are measured at once, each run its own processes: a
	// process's resident set is its own whatever runs beside it.
	names := strings.Split(*stores, ",")
	lines := make([]string, len(names))
	var wg sync.WaitGroup
	for i, s := range names {
		wg.Go(func() {
			url, env, err := storeURL(s, dir)
			if err != nil {
				lines[i] = fmt.Sprintf("%-10s %s", s, err)
				return
			}
			tenure, sup, err := measure(full, url, env, *lease, *settle, *every)
			if err != nil {
				lines[i] = fmt.Sprintf("%-10s %v", s, err)
				return
			}
			lines[i] = fmt.Sprintf("%-10s %7.1f MB %9.1f MB", s, float64(tenure)/1024, float64(sup)/1024)
		})
	}
	wg.Wait()
	for _, l := range lines {
		fmt.Println(l)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "footprint:", err)
	os.Exit(1)
}

// build builds ./cmd/tenure into out.
func build(out string, env []string, flags ...string) {
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, "./cmd/tenure")...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fail(fmt.Errorf("go build: %w", err))
	}
}

func size(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		fail(err)
	}
	return fmt.Sprintf("%.1f MB (%d bytes)", float64(fi.Size())/1e6, fi.Size())
}

// storeURL returns the URL of a store name, with the environment it needs:
// the servers scripts/testservers.sh started, by the variables it sets.
func storeURL(name, dir string) (string, []string, error) {
	if strings.Contains(name, ":") {
		return name, nil, nil
	}
	unique := fmt.Sprintf("footprint-%08x", rand.Uint32())
	env := os.Getenv
	var url string
	var vars []string
	switch name {
	case "file":
		url = "file://" + filepath.Join(dir, "leases")
	case "dynamodb":
		if e := env("TENURE_DYNAMODB_ENDPOINT"); e != "" {
			url = "dynamodb://" + unique + "?region=us-east-1&create=true&endpoint=" + e
			vars = []string{"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench"}
		}
	case "s3":
		if e := env("TENURE_MINIO_ENDPOINT"); e != "" {
			url = "s3://" + unique + "/tenure/?region=us-east-1&path-style=true&create=true&endpoint=" + e
			vars = []string{"AWS_ACCESS_KEY_ID=" + env("TENURE_MINIO_ACCESS_KEY"), "AWS_SECRET_ACCESS_KEY=" + env("TENURE_MINIO_SECRET_KEY")}
		}
	case "postgres":
		if u := env("TENURE_POSTGRES_URL"); u != "" {
			url = u + "&create=true&table=" + strings.ReplaceAll(unique, "-", "_")
		}
	case "etcd":
		if e := env("TENURE_ETCD_ENDPOINT"); e != "" {
			url = "etcd://" + e + "/" + unique + "/"
		}
	case "gcs":
		if e := env("TENURE_GCS_ENDPOINT"); e != "" {
			url = "gs://" + unique + "/tenure/?create=true&project=bench&endpoint=" + e
		}
	case "azblob":
		if e := env("TENURE_AZURITE_ENDPOINT"); e != "" {
			url = "azblob://" + env("TENURE_AZURITE_ACCOUNT") + "/" + unique + "/tenure/?create=true&endpoint=" + e
			vars = []string{"AZURE_STORAGE_KEY=" + env("TENURE_AZURITE_KEY")}
		}
	case "k8s":
		if kc := env("TENURE_KUBECONFIG"); kc != "" {
			url = "k8s://default?kubeconfig=" + kc
		}
	default:
		return "", nil, fmt.Errorf("unknown store %q", name)
	}
	if url == "" {
		return "", nil, fmt.Errorf("no server: run under scripts/testservers.sh")
	}
	return url, vars, nil
}

// measure runs tenure run on url supervising sleep, and returns the most
// VmRSS, in kB, of tenure and of its supervisor over settle once the
// command runs.
func measure(bin, url string, env []string, lease, settle, every time.Duration) (tenure, sup int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), settle+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--store", url, "--lease", lease.String(), "--id", "footprint",
		fmt.Sprintf("footprint-%08x", rand.Uint32()), "--", "sleep", "3600")
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	elected := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "elected, token") {
				once = true
				close(elected)
			}
		}
	}()
	select {
	case <-elected:
	case <-time.After(time.Minute):
		return 0, 0, fmt.Errorf("not elected within a minute")
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for end := time.Now().Add(settle); time.Now().Before(end); {
		<-tick.C
		tenure = max(tenure, rss(cmd.Process.Pid))
		for _, c := range children(cmd.Process.Pid) {
			sup = max(sup, rss(c))
		}
	}
	return tenure, sup, nil
}

// rss reads a process's VmRSS, in kB.
func rss(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

// children returns pid's child processes (tenure's supervisor), of any of
// its threads.
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
