//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fget sends GET path to addr and returns the status and body ("" and 0 if
// the connection failed).
func fget(addr, path string) (int, string) { return get("http://" + addr + path) }

// TestProcessForward: two replicas of a service, each behind `tenure
// forward`: whichever a request reaches, the leader's service answers;
// once the leader is killed, the other's answers, within the hold; a
// request under --local stays where it lands.
func TestProcessForward(t *testing.T) {
	for _, mode := range []string{"http", "tcp"} {
		t.Run(mode, func(t *testing.T) {
			e := newProcEnv(t, "")
			var mu sync.Mutex
			served := map[string]int{}
			backend := func(id string) *httptest.Server {
				return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					served[id]++
					mu.Unlock()
					if mode == "http" && r.URL.Path != "/healthz" && r.Header.Get("Fencing-Token") == "" {
						t.Errorf("%s: no Fencing-Token", id)
					}
					fmt.Fprint(w, id)
				}))
			}
			type rep struct {
				listen, peer, addr string
				svc                *httptest.Server
				seen               *logWatch
				cmd                *exec.Cmd
			}
			reps := map[string]*rep{}
			start := func(id, want string) *rep {
				r := &rep{listen: freeAddr(t), svc: backend(id), seen: &logWatch{want: want, seen: make(chan struct{})}}
				t.Cleanup(r.svc.Close)
				args := []string{"forward", "--store", e.store, "--lease", "2s", "--hold", "10s", "--id", id, "--listen", r.listen,
					"--to", r.svc.Listener.Addr().String(), "--mode", mode}
				r.addr = r.listen
				if mode == "tcp" {
					r.peer = freeAddr(t)
					r.addr = r.peer
					args = append(args, "--peer", r.peer)
				} else {
					args = append(args, "--local", "/healthz")
				}
				args = append(args, "--addr", r.addr, "web")
				reps[id] = r
				r.cmd = e.start(r.seen, args)
				return r
			}
			await := func(r *rep) {
				select {
				case <-r.seen.seen:
				case <-time.After(20 * time.Second):
					t.Fatalf("no %q", r.seen.want)
				}
			}
			a := start("a", "elected, token")
			await(a)
			b := start("b", "campaigning for") // logged once it listens
			await(b)
			for _, r := range []*rep{a, b} {
				if code, body := fget(r.listen, "/orders"); code != 200 || body != "a" {
					t.Fatalf("via %s: %d %q, want the leader a's service", r.listen, code, body)
				}
			}
			if mode == "http" {
				if code, body := fget(b.listen, "/healthz"); code != 200 || body != "b" {
					t.Fatalf("local: %d %q, want b's own service", code, body)
				}
			}
			mu.Lock()
			before := served["b"]
			mu.Unlock()
			// Kill a: b leads within a failover, and a request sent now is
			// held until it does.
			if err := a.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = a.cmd.Wait() // dead: a request sent as it died is in flight (502), not this one
			if code, body := fget(b.listen, "/orders"); code != 200 || body != "b" {
				t.Fatalf("after the kill: %d %q, want b's service", code, body)
			}
			mu.Lock()
			defer mu.Unlock()
			if served["b"] != before+1 {
				t.Fatalf("served %v: want b's service to have served the one request since", served)
			}
		})
	}
}

// steadyLoad sends a POST every 10 ms to its replicas in turn until stop
// is called, as a load balancer would: it sends nothing to a replica once
// told that it stops (a Service, a terminating Pod), and a request that a
// replica refuses to connect goes to the next.
type steadyLoad struct {
	mu       sync.Mutex
	addrs    []string
	failed   []string
	quit     chan struct{}
	done     chan struct{}
	sends    sync.WaitGroup
	stopping map[string]bool
	sent     int
	tick     chan struct{} // closed and replaced at every request sent
}

func startLoad(addrs ...string) *steadyLoad {
	l := &steadyLoad{addrs: addrs, quit: make(chan struct{}), done: make(chan struct{}), stopping: map[string]bool{}, tick: make(chan struct{})}
	go l.run()
	return l
}

func (l *steadyLoad) run() {
	defer close(l.done)
	c := http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-l.quit:
			return
		case <-tick.C:
		}
		l.mu.Lock()
		var to []string
		for _, a := range l.addrs {
			if !l.stopping[a] {
				to = append(to, a)
			}
		}
		l.sent++
		close(l.tick)
		l.tick = make(chan struct{})
		l.mu.Unlock()
		l.sends.Go(func() {
			var resp *http.Response
			var err error
			for i := range to {
				resp, err = c.Post("http://"+to[(n+i)%len(to)]+"/load", "text/plain", strings.NewReader("x"))
				var op *net.OpError
				if !errors.As(err, &op) || op.Op != "dial" {
					break
				}
			}
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
				err = errors.New(resp.Status)
			}
			l.mu.Lock()
			l.failed = append(l.failed, fmt.Sprintf("request %d: %v", n, err))
			l.mu.Unlock()
		})
	}
}

// stopSending sends nothing more to addr.
func (l *steadyLoad) stopSending(addr string) {
	l.mu.Lock()
	l.stopping[addr] = true
	l.mu.Unlock()
}

// awaitSent returns once n more requests have been sent.
func (l *steadyLoad) awaitSent(n int) {
	l.mu.Lock()
	want := l.sent + n
	for l.sent < want {
		tick := l.tick
		l.mu.Unlock()
		<-tick
		l.mu.Lock()
	}
	l.mu.Unlock()
}

// stop ends the load once its requests are answered, and returns those
// that failed.
func (l *steadyLoad) stop() []string {
	close(l.quit)
	<-l.done
	l.sends.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// discardWatch is a logWatch that passes nothing on (the other copy of the
// log does).
type discardWatch struct{ w *logWatch }

func (d discardWatch) Write(b []byte) (int, error) {
	if strings.Contains(string(b), d.w.want) {
		d.w.once.Do(func() { close(d.w.seen) })
	}
	return len(b), nil
}

// TestProcessForwardHandoverAndPause, http mode, on the file store,
// DynamoDB Local and the API server: a SIGTERM hands the lease over
// without failing a request sent meanwhile, a slow one in flight or any
// of a steady load sent to every replica (none served under a token below
// one served before), and the stopped replica exits 0; a leader paused
// past its lease (SIGSTOP) is replaced, and once it runs again it forwards
// to the new leader, whose service alone serves, under a higher token.
func TestProcessForwardHandoverAndPause(t *testing.T) {
	stores := func(t *testing.T, f func(t *testing.T, e *procEnv)) {
		onStores(t, f)
		t.Run("k8s", func(t *testing.T) { f(t, kubeProcEnv(t)) })
	}
	stores(t, func(t *testing.T, e *procEnv) {
		var mu sync.Mutex
		tokens := map[string][]string{} // per service, the tokens it served under
		var highest uint64              // the resource: the highest token served under
		var stale []string              // requests served under a lower one
		type rep struct {
			listen   string
			cmd      *exec.Cmd
			seen     *logWatch
			elected  chan struct{} // closed at its first "elected" line
			handover chan struct{} // closed as it begins to hand over
		}
		// /slow waits for gate: a request in flight while its leader
		// hands over.
		arrived, gate := make(chan struct{}, 1), make(chan struct{})
		start := func(id, want string) *rep {
			svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					arrived <- struct{}{}
					<-gate
				}
				tok, _ := strconv.ParseUint(r.Header.Get("Fencing-Token"), 10, 64)
				mu.Lock()
				tokens[id] = append(tokens[id], r.Header.Get("Fencing-Token"))
				if tok < highest {
					stale = append(stale, fmt.Sprintf("%s %s under %d after %d", r.Method, r.URL.Path, tok, highest))
				}
				highest = max(highest, tok)
				mu.Unlock()
				fmt.Fprint(w, id)
			}))
			t.Cleanup(svc.Close)
			r := &rep{listen: freeAddr(t), seen: &logWatch{want: want, seen: make(chan struct{})}, elected: make(chan struct{}), handover: make(chan struct{})}
			el := &logWatch{want: "elected, token", seen: r.elected}
			ho := &logWatch{want: "handing over", seen: r.handover}
			r.cmd = e.start(io.MultiWriter(r.seen, discardWatch{el}, discardWatch{ho}), []string{"forward", "--store", e.store, "--lease", "2s", "--hold", "10s", "--id", id,
				"--listen", r.listen, "--addr", r.listen, "--to", svc.Listener.Addr().String(), "web"})
			select {
			case <-r.seen.seen:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: no %q", id, want)
			}
			return r
		}
		a := start("a", "elected, token")
		b := start("b", "campaigning for")
		c := start("c", "campaigning for")
		load := startLoad(a.listen, b.listen, c.listen)

		// Handover: a request that a's service is serving as a gets SIGTERM
		// is answered (a drains it before it gives the lease back), and a
		// exits 0.
		done := make(chan string, 1)
		go func() {
			code, body := fget(a.listen, "/slow")
			done <- fmt.Sprint(code, " ", body)
		}()
		<-arrived
		load.stopSending(a.listen)
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-a.handover // draining: the term must outlast the request
		// Meanwhile the others forward their share of the load to a, which
		// holds it for the next leader.
		load.awaitSent(30)
		close(gate)
		if err := a.cmd.Wait(); err != nil {
			t.Fatalf("a after SIGTERM: %v, want exit 0", err)
		}
		if got := <-done; got != "200 a" {
			t.Fatalf("the request in flight through the handover: %q, want a's answer", got)
		}
		code, leader := fget(b.listen, "/orders")
		if code != 200 || leader == "a" {
			t.Fatalf("after the handover: %d %q", code, leader)
		}
		if failed := load.stop(); len(failed) > 0 {
			t.Fatalf("the steady load through the handover: %d failed: %q", len(failed), failed[:min(len(failed), 5)])
		}
		mu.Lock()
		if len(stale) > 0 {
			t.Fatalf("served under a token below one served before: %q", stale)
		}
		mu.Unlock()

		// Pause the new leader past its lease: the other takes over; once the
		// paused one runs again, its requests go to the new leader.
		paused, other := b, c
		if leader == "c" {
			paused, other = c, b
		}
		if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// Once the other leads, its requests are its service's (a request sent
		// before, forwarded to the paused leader, would wait for it to run
		// again: docs/forwarding.md).
		select {
		case <-other.elected:
		case <-time.After(20 * time.Second):
			t.Fatal("the other replica did not take over")
		}
		code, next := fget(other.listen, "/orders")
		if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if code != 200 || next == leader {
			t.Fatalf("during the pause: %d %q, want the other replica's service", code, next)
		}
		if code, body := fget(paused.listen, "/orders"); code != 200 || body != next {
			t.Fatalf("through the resumed replica: %d %q, want %q's service", code, body, next)
		}
		mu.Lock()
		defer mu.Unlock()
		last := func(id string) string { return tokens[id][len(tokens[id])-1] }
		if len(tokens[leader]) == 0 || len(tokens[next]) == 0 || len(last(next)) < len(last(leader)) || len(last(next)) == len(last(leader)) && last(next) <= last(leader) {
			t.Fatalf("tokens %v: want %s's above %s's", tokens, next, leader)
		}
	})
}
