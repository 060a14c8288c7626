//go:build linux

// Command forward measures requests through leader changes: three
// replicas of a service, each behind `tenure forward` (real processes, on
// loopback), take a steady load of write requests sent to all of them,
// while the leader is handed over (SIGTERM, then started again), killed
// (SIGKILL, then started again) and paused past its lease (SIGSTOP for
// three leases, then SIGCONT). The service of every replica writes to one
// resource that keeps the highest fencing token it saw (the Fencing-Token
// header tenure forward gives the leader's service): a request served
// under a lower one was served by a replica that was no longer the
// leader. docs/performance.md gives the figures.
//
//	scripts/testservers.sh run -- go run ./bench/forward     # file, DynamoDB Local, the API server
//	go run ./bench/forward -stores file
//
// The load goes to the replicas in turn, and a request whose replica
// refuses the connection (stopped, or starting again) goes to the next, as
// a load balancer's would. For each change it prints the requests sent from
// a second before it to the end of the phase: how many succeeded and failed, their latency (p50,
// p99, max: a held request's wait is in it), and how many were served by a
// replica that was not the leader.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	stores := flag.String("stores", "file,dynamodb,k8s", "stores: file, dynamodb, k8s (the servers scripts/testservers.sh starts)")
	rate := flag.Int("rate", 200, "requests a second, spread over the replicas")
	leaseFor := flag.Duration("lease", 2*time.Second, "the lease")
	hold := flag.Duration("hold", 0, "how long a request waits for a leader (default: three leases)")
	phase := flag.Duration("phase", 0, "how long each phase lasts after its change (default: eight leases)")
	flag.Parse()
	if *hold == 0 {
		*hold = 3 * *leaseFor
	}
	if *phase == 0 {
		*phase = 8 * *leaseFor
	}
	dir, err := os.MkdirTemp("", "bench-forward")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "tenure")
	build := exec.Command("go", "build", "-o", bin, "./cmd/tenure")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fail(fmt.Errorf("go build: %w", err))
	}
	fmt.Printf("tenure forward, 3 replicas, %d requests/s to all of them, lease %v, hold %v\n\n", *rate, *leaseFor, *hold)
	fmt.Printf("%-9s %-9s %6s %6s %7s %9s %9s %9s %11s\n", "store", "change", "sent", "ok", "failed", "p50", "p99", "max", "non-leader")
	for _, s := range strings.Split(*stores, ",") {
		url, env, err := storeURL(s, dir)
		if err != nil {
			fmt.Printf("%-9s %v\n", s, err)
			continue
		}
		b := &bench{bin: bin, url: url, env: env, lease: *leaseFor, hold: *hold, phase: *phase, rate: *rate}
		for _, l := range b.run() {
			fmt.Printf("%-9s %s\n", s, l)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "forward:", err)
	os.Exit(1)
}

type bench struct {
	bin, url           string
	env                []string
	lease, hold, phase time.Duration
	rate               int
	name               string
	mu                 sync.Mutex
	highest            uint64 // the resource: the highest token it saw
	stale              int    // requests served under a lower one
	last               int    // the replica that served the latest request
	reps               [3]*rep
	results            []result
	changes            []change
	sends              sync.WaitGroup
}

type rep struct {
	id     string
	listen string
	svc    *http.Server
	svcLn  net.Listener
	cmd    *exec.Cmd
	done   chan struct{}
}

type result struct {
	start, end time.Time
	ok         bool
	stale      bool
}

type change struct {
	name string
	at   time.Time
}

func (b *bench) run() []string {
	b.name = fmt.Sprintf("bench-forward-%08x", rand.Uint32())
	for i := range b.reps {
		r := &rep{id: fmt.Sprintf("r%d", i+1), listen: freeAddr()}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err)
		}
		r.svcLn = ln
		r.svc = &http.Server{Handler: b.service(i)}
		go r.svc.Serve(ln)
		b.reps[i] = r
		b.start(i)
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * b.lease)
	stop := make(chan struct{})
	go b.load(stop)
	time.Sleep(2 * time.Second)
	b.handover()
	b.kill()
	b.pause()
	close(stop)
	b.sends.Wait()
	for i := range b.reps {
		b.stopRep(i, syscall.SIGTERM)
		b.reps[i].svc.Close()
	}
	return b.report()
}

// service is replica i's: it writes to the resource under the token its
// tenure forward gives it.
func (b *bench) service(i int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tok, err := strconv.ParseUint(r.Header.Get("Fencing-Token"), 10, 64)
		if err != nil {
			http.Error(w, "no token", http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		stale := tok < b.highest
		if stale {
			b.stale++
		} else {
			b.highest = tok
		}
		b.last = i
		b.mu.Unlock()
		if stale {
			w.Header().Set("Stale", "1")
		}
		fmt.Fprintln(w, "written")
	})
}

func (b *bench) start(i int) {
	r := b.reps[i]
	cmd := exec.Command(b.bin, "forward", "--store", b.url, "--lease", b.lease.String(), "--hold", b.hold.String(),
		"--id", r.id, "--listen", r.listen, "--addr", r.listen, "--to", r.svcLn.Addr().String(), b.name)
	cmd.Env = append(os.Environ(), b.env...)
	var logb bytes.Buffer
	cmd.Stderr = &logb
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(r.done) }()
}

func (b *bench) stopRep(i int, sig syscall.Signal) {
	r := b.reps[i]
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func (b *bench) leader() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

func (b *bench) mark(name string) {
	b.mu.Lock()
	b.changes = append(b.changes, change{name, time.Now()})
	b.mu.Unlock()
}

func (b *bench) handover() {
	l := b.leader()
	b.mark("handover")
	b.stopRep(l, syscall.SIGTERM)
	b.start(l)
	time.Sleep(b.phase)
}

func (b *bench) kill() {
	l := b.leader()
	b.mark("kill")
	b.stopRep(l, syscall.SIGKILL)
	b.start(l)
	time.Sleep(b.phase)
}

func (b *bench) pause() {
	l := b.leader()
	b.mark("pause")
	_ = b.reps[l].cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(3 * b.lease)
	_ = b.reps[l].cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(b.phase - 3*b.lease)
}

// load sends rate requests a second, round robin over the replicas.
func (b *bench) load(stop chan struct{}) {
	client := &http.Client{Timeout: b.hold + 10*time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	tick := time.NewTicker(time.Second / time.Duration(b.rate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		b.sends.Go(func() {
			res := result{start: time.Now()}
			var resp *http.Response
			var err error
			// As a load balancer does: a replica that refuses the
			// connection (stopped, or being started again) served
			// nothing, and the request goes to the next.
			for i := range 3 {
				resp, err = client.Post("http://"+b.reps[(n+i)%3].listen+"/write", "text/plain", strings.NewReader("x"))
				var op *net.OpError
				if !errors.As(err, &op) || op.Op != "dial" {
					break
				}
			}
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				res.ok = resp.StatusCode == http.StatusOK
				res.stale = resp.Header.Get("Stale") != ""
			}
			res.end = time.Now()
			b.mu.Lock()
			b.results = append(b.results, res)
			b.mu.Unlock()
		})
	}
}

func (b *bench) report() []string {
	var out []string
	for i, c := range b.changes {
		from := c.at.Add(-time.Second)
		to := c.at.Add(b.phase)
		if i+1 < len(b.changes) {
			to = b.changes[i+1].at.Add(-time.Second)
		}
		var lat []time.Duration
		ok, failed, stale := 0, 0, 0
		for _, r := range b.results {
			if r.start.Before(from) || !r.start.Before(to) {
				continue
			}
			lat = append(lat, r.end.Sub(r.start))
			if r.ok {
				ok++
			} else {
				failed++
			}
			if r.stale {
				stale++
			}
		}
		slices.Sort(lat)
		q := func(p float64) string {
			if len(lat) == 0 {
				return "-"
			}
			return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(time.Millisecond).String()
		}
		out = append(out, fmt.Sprintf("%-9s %6d %6d %7d %9s %9s %9s %11d", c.name, len(lat), ok, failed, q(0.5), q(0.99), q(1), stale))
	}
	return out
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// storeURL returns the URL of a store name, with the environment it needs:
// the servers scripts/testservers.sh started, by the variables it sets.
func storeURL(name, dir string) (string, []string, error) {
	env := os.Getenv
	unique := fmt.Sprintf("bench-forward-%08x", rand.Uint32())
	switch name {
	case "file":
		return "file://" + filepath.Join(dir, "leases-"+unique), nil, nil
	case "dynamodb":
		if e := env("TENURE_DYNAMODB_ENDPOINT"); e != "" {
			return "dynamodb://" + unique + "?region=us-east-1&create=true&endpoint=" + e, []string{"AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench"}, nil
		}
	case "k8s":
		if kc := env("TENURE_KUBECONFIG"); kc != "" {
			return "k8s://default?kubeconfig=" + kc, nil, nil
		}
	default:
		return "", nil, fmt.Errorf("unknown store %q", name)
	}
	return "", nil, fmt.Errorf("no server: run under scripts/testservers.sh")
}
