package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
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
func fget(addr, path string) (int, string) {
	c := http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

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
