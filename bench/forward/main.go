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
// The load goes to the replicas in turn, as a load balancer's would: it
// stops sending to a replica from the moment that replica is told to stop
// (SIGTERM), as a Service does for a terminating Pod, and a request whose
// replica refuses the connection (killed, or starting again) goes to the
// next. For each change it prints the requests sent from
// a second before it to the end of the phase: how many succeeded and failed, their latency (p50,
// p99, max: a held request's wait is in it), and how many were served by a
// replica that was not the leader.
//
// On the API server the bench runs the same load against the leader-only
// label instead (store k8s-label): each replica is a Pod object and `tenure
// run --label-pod` in front of the service, which runs only while its
// replica leads and writes under the token tenure run gives it
// (TENURE_TOKEN). The load follows the Pods that carry the label, as a
// Service does: to each of them in turn, none when none does. It follows
// them from a watch, at once, with no endpoints controller and no
// kube-proxy between (a real cluster adds their delay), and a replica that
// refuses the connection sends the request to the next labelled one.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	stores := flag.String("stores", "file,dynamodb,k8s,k8s-label", "stores: file, dynamodb, k8s, and k8s-label for the leader-only label (the servers scripts/testservers.sh starts)")
	rate := flag.Int("rate", 200, "requests a second, spread over the replicas")
	leaseFor := flag.Duration("lease", 2*time.Second, "the lease")
	hold := flag.Duration("hold", 0, "how long a request waits for a leader (default: three leases)")
	phase := flag.Duration("phase", 0, "how long each phase lasts after its change (default: eight leases)")
	child := flag.String("child", "", "run as the service a replica's tenure run starts: listen on this address (the bench's own use)")
	to := flag.String("to", "", "with -child: the service to pass requests to")
	flag.Parse()
	if *child != "" {
		serveChild(*child, *to)
		return
	}
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
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	fmt.Printf("tenure forward, 3 replicas, %d requests/s to all of them, lease %v, hold %v\n", *rate, *leaseFor, *hold)
	fmt.Printf("(k8s-label: tenure run --label-pod, the load to the labelled Pods)\n\n")
	fmt.Printf("%-9s %-9s %6s %6s %7s %9s %9s %9s %11s\n", "store", "change", "sent", "ok", "failed", "p50", "p99", "max", "non-leader")
	for _, s := range strings.Split(*stores, ",") {
		url, env, err := storeURL(s, dir)
		if err != nil {
			fmt.Printf("%-9s %v\n", s, err)
			continue
		}
		b := &bench{bin: bin, self: self, url: url, env: env, lease: *leaseFor, hold: *hold, phase: *phase, rate: *rate}
		if s == "k8s-label" {
			if err := b.labelMode(env); err != nil {
				fmt.Printf("%-9s %v\n", s, err)
				continue
			}
		}
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
	bin, self, url     string
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

	// The leader-only label (k8s-label): the namespace of the replicas'
	// Pods, and which of them carry the label, from a watch.
	kube     *kubernetes.Clientset
	ns       string
	labelled [3]bool

	stopping [3]bool // told to stop: the load balancer sends it nothing
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
		if b.kube != nil {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: r.id}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "service", Image: "service"}}}}
			if _, err := b.kube.CoreV1().Pods(b.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				fail(err)
			}
		}
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
	if b.kube != nil {
		_ = b.kube.CoreV1().Namespaces().Delete(context.Background(), b.ns, metav1.DeleteOptions{})
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
	if b.kube != nil {
		cmd = exec.Command(b.bin, "run", "--store", b.url, "--lease", b.lease.String(), "--label-pod", "--id", r.id, b.name,
			"--", b.self, "-child", r.listen, "-to", r.svcLn.Addr().String())
		cmd.Env = append(os.Environ(), append(b.env, "POD_NAME="+r.id, "POD_NAMESPACE="+b.ns)...)
	}
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
	b.mu.Lock()
	b.stopping[l] = true
	b.mu.Unlock()
	b.stopRep(l, syscall.SIGTERM)
	b.mu.Lock()
	b.stopping[l] = false
	b.mu.Unlock()
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
			to := b.targets()
			err = errors.New("no replica to send to")
			for i := range to {
				resp, err = client.Post("http://"+b.reps[to[(n+i)%len(to)]].listen+"/write", "text/plain", strings.NewReader("x"))
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

// targets returns the replicas the load goes to: all of them, or on the
// leader-only label those whose Pods carry it; none that is stopping.
func (b *bench) targets() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var to []int
	for i, l := range b.labelled {
		if (l || b.kube == nil) && !b.stopping[i] {
			to = append(to, i)
		}
	}
	return to
}

// labelMode sets the bench up for the leader-only label: a namespace of
// its own for the Pods (the store's URL names it), and a watch of their
// labels.
func (b *bench) labelMode(env []string) error {
	kc := os.Getenv("TENURE_KUBECONFIG")
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return err
	}
	if b.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	b.ns = fmt.Sprintf("bench-label-%08x", rand.Uint32())
	ctx := context.Background()
	if _, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	b.url = "k8s://" + b.ns + "?kubeconfig=" + kc
	go b.follow(ctx)
	return nil
}

// follow keeps b.labelled: which replicas' Pods carry the leader label.
func (b *bench) follow(ctx context.Context) {
	pods := b.kube.CoreV1().Pods(b.ns)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			b.see(&list.Items[i], false)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				b.see(p, ev.Type == watch.Deleted)
			}
		}
	}
}

func (b *bench) see(p *corev1.Pod, deleted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, r := range b.reps {
		if r != nil && r.id == p.Name {
			b.labelled[i] = !deleted && p.Labels["tenure.dev/leader"] == "true"
		}
	}
}

// serveChild is the service a replica's tenure run starts on the
// leader-only label: it passes each request on to the replica's service
// with the token of the term it runs in, and on SIGTERM answers what it
// holds before it exits.
func serveChild(listen, to string) {
	target, err := url.Parse("http://" + to)
	if err != nil {
		fail(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	token := os.Getenv("TENURE_TOKEN")
	srv := &http.Server{Addr: listen, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Fencing-Token", token)
		proxy.ServeHTTP(w, r)
	})}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
		close(done)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fail(err)
	}
	<-done
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
	case "k8s", "k8s-label":
		if kc := env("TENURE_KUBECONFIG"); kc != "" {
			return "k8s://default?kubeconfig=" + kc, nil, nil
		}
	default:
		return "", nil, fmt.Errorf("unknown store %q", name)
	}
	return "", nil, fmt.Errorf("no server: run under scripts/testservers.sh")
}
