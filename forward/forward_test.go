package forward_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/forward"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// cluster is three replicas of a service in one synctest bubble: each a
// Candidate on one memlease store, its service wrapped by forward, and an
// in-memory network between them (net), so that time is fake and nothing
// sleeps.
type cluster struct {
	t     *testing.T
	mem   *memlease.Store
	reps  map[string]*replica
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	serve []served // every request a service served, in order
}

// served is a request served by a replica's service, with the token of the
// term it ran under.
type served struct {
	by    string
	token fencing.Token
	path  string
}

type replica struct {
	id      string
	store   *cutStore
	c       *tenure.Candidate
	h       http.Handler
	stop    context.CancelFunc
	done    chan struct{}
	down    bool          // nothing listens: a dial fails
	drop    bool          // a connection is reset before the handler has it
	dies    bool          // a connection is reset once the handler has it
	service http.Handler  // what forward wraps
	block   chan struct{} // non-nil: the service waits for its term to end
}

type cutStore struct {
	lease.Store
	mu  sync.Mutex
	cut bool
}

var errCut = errors.New("cut off")

func (s *cutStore) isCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

func (s *cutStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.isCut() {
		return lease.Record{}, lease.NoVersion, errCut
	}
	return s.Store.Get(ctx, name)
}

func (s *cutStore) Put(ctx context.Context, name string, rec lease.Record, v lease.Version) (lease.Version, error) {
	if s.isCut() {
		return lease.NoVersion, errCut
	}
	return s.Store.Put(ctx, name, rec, v)
}

const leaseFor = 2 * time.Second

func newCluster(t *testing.T, opts func(*forward.Config)) *cluster {
	k := &cluster{t: t, mem: memlease.New(), reps: map[string]*replica{}}
	k.ctx, k.stop = context.WithCancel(context.Background())
	for _, id := range []string{"a", "b", "c"} {
		r := &replica{id: id, store: &cutStore{Store: k.mem}}
		c, err := tenure.New(tenure.Config{Lease: "svc", Store: r.store, Addr: id + ":80",
			Timing: tenure.Timing{LeaseDuration: leaseFor}, Runtime: tenure.Runtime{ID: id}})
		if err != nil {
			t.Fatal(err)
		}
		r.c = c
		r.service = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			f, _ := fencing.FromContext(req.Context())
			if r.block != nil {
				<-req.Context().Done()
			}
			body, _ := io.ReadAll(req.Body)
			k.mu.Lock()
			k.serve = append(k.serve, served{by: id, token: f.Token, path: req.URL.Path})
			k.mu.Unlock()
			fmt.Fprintf(w, "%s served %s %s", id, req.Method, body)
		})
		cfg := forward.Config{Candidate: c, Handler: r.service, Transport: k, Poll: 10 * time.Millisecond,
			Local: func(req *http.Request) bool { return req.URL.Path == "/healthz" }}
		if opts != nil {
			opts(&cfg)
		}
		h, err := forward.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.h = h
		k.reps[id] = r
	}
	return k
}

// start runs replica id's candidate.
func (k *cluster) start(id string) {
	r := k.reps[id]
	ctx, cancel := context.WithCancel(k.ctx)
	r.stop, r.done = cancel, make(chan struct{})
	k.wg.Go(func() {
		defer close(r.done)
		_ = r.c.Run(ctx)
	})
}

// startAll runs every replica's candidate, and waits a lease for one to
// lead.
func (k *cluster) startAll() {
	for _, id := range []string{"a", "b", "c"} {
		k.start(id)
	}
	time.Sleep(leaseFor)
}

func (k *cluster) close() {
	k.stop()
	k.wg.Wait()
}

// RoundTrip is the network: a request to "id:80" reaches replica id's
// handler, unless it is down (refused) or drops it (reset before the
// handler has it: a listener closed with the connection in its queue);
// its 1xx responses go to the request's trace, as a client's do.
func (k *cluster) RoundTrip(req *http.Request) (*http.Response, error) {
	id, _, _ := net.SplitHostPort(req.URL.Host)
	r := k.reps[id]
	if r == nil || r.down {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	if r.drop {
		return nil, reset
	}
	rec := &informational{ResponseRecorder: httptest.NewRecorder()}
	r.h.ServeHTTP(rec, req)
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.Got1xxResponse != nil {
		for _, code := range rec.early {
			if err := trace.Got1xxResponse(code, nil); err != nil {
				return nil, err
			}
		}
	}
	if r.dies {
		return nil, reset
	}
	return rec.Result(), nil
}

// send sends a request to replica id and returns its status and body.
func (k *cluster) send(id, method, path, body string) (int, string, http.Header) {
	req := httptest.NewRequest(method, "http://"+id+":80"+path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	k.reps[id].h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}

func (k *cluster) leader() string {
	for id, r := range k.reps {
		if r.c.Status().Leading {
			return id
		}
	}
	return ""
}

func (k *cluster) others(id string) []string {
	var out []string
	for _, o := range []string{"a", "b", "c"} {
		if o != id {
			out = append(out, o)
		}
	}
	return out
}

func TestFollowersForwardToTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, nil)
		defer k.close()
		k.startAll()
		l := k.leader()
		for _, id := range []string{"a", "b", "c"} {
			code, body, _ := k.send(id, "POST", "/orders", "order "+id)
			if want := l + " served POST order " + id; code != 200 || body != want {
				t.Fatalf("via %s: %d %q, want 200 %q", id, code, body, want)
			}
		}
		tok := k.reps[l].c.Status().Token
		for _, s := range k.serve {
			if s.by != l || s.token != tok {
				t.Fatalf("served %+v: want by %s under token %d", s, l, tok)
			}
		}
		// Local requests stay where they land.
		f := k.others(l)[0]
		if code, body, _ := k.send(f, "GET", "/healthz", ""); code != 200 || !strings.HasPrefix(body, f+" served") {
			t.Fatalf("local: %d %q", code, body)
		}
	})
}

func TestRedirect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, func(c *forward.Config) { c.Redirect = true })
		defer k.close()
		k.startAll()
		l := k.leader()
		code, _, hdr := k.send(k.others(l)[0], "POST", "/orders?id=7", "x")
		if want := "http://" + l + ":80/orders?id=7"; code != http.StatusTemporaryRedirect || hdr.Get("Location") != want {
			t.Fatalf("%d %q, want 307 %q", code, hdr.Get("Location"), want)
		}
		if len(k.serve) != 0 {
			t.Fatalf("served: %+v", k.serve)
		}
	})
}

func TestNoLeaderHoldsThen503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, func(c *forward.Config) { c.Hold = 3 * time.Second })
		defer k.close()
		start := time.Now()
		code, _, hdr := k.send("a", "POST", "/orders", "x") // no candidate runs
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || time.Since(start) != 3*time.Second {
			t.Fatalf("%d, Retry-After %q, after %v: want 503 with Retry-After after the 3s hold", code, hdr.Get("Retry-After"), time.Since(start))
		}
	})
}

func TestHeldThroughACrashThenServedByTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A failover takes a lease and a poll or two from the last
		// renewal: a request sent at the crash waits longer than a lease.
		k := newCluster(t, func(c *forward.Config) { c.Hold = 2 * leaseFor })
		defer k.close()
		k.startAll()
		l := k.leader()
		old := k.reps[l]
		old.store.mu.Lock()
		old.store.cut = true // it stops renewing, and its term runs out
		old.store.mu.Unlock()
		old.down = true // nothing listens there any more
		f := k.others(l)[0]
		code, body, _ := k.send(f, "POST", "/orders", "during the failover")
		nl := k.leader()
		if nl == "" || nl == l || code != 200 || body != nl+" served POST during the failover" {
			t.Fatalf("%d %q, leader %q (was %q)", code, body, nl, l)
		}
		for _, s := range k.serve {
			if s.by == l {
				t.Fatalf("served by the old leader: %+v", k.serve)
			}
		}
	})
}

// TestConnectionResetBeforeTakenGoesToTheNext: a forwarded request whose
// connection is reset before the leader's handler has it (a listener
// closed as its replica shut down) was not served, and goes to the next
// leader; one reset after the handler answered 102 may have been served,
// and is answered 502.
func TestConnectionResetBeforeTakenGoesToTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, func(c *forward.Config) { c.Hold = 2 * leaseFor })
		defer k.close()
		k.startAll()
		l := k.leader()
		f := k.others(l)[0]
		k.reps[l].dies = true
		if code, body, _ := k.send(f, "POST", "/orders", "taken"); code != http.StatusBadGateway {
			t.Fatalf("reset once taken: %d %q, want 502", code, body)
		}
		k.reps[l].dies, k.reps[l].drop = false, true
		answered := make(chan string)
		go func() {
			code, body, _ := k.send(f, "POST", "/orders", "dropped")
			answered <- fmt.Sprint(code, " ", body)
		}()
		synctest.Wait()
		k.reps[l].stop() // it gives the lease back
		got := <-answered
		nl := k.leader()
		if nl == "" || nl == l || got != "200 "+nl+" served POST dropped" {
			t.Fatalf("reset before taken: %q, leader %q (was %q): want the next leader's answer", got, nl, l)
		}
	})
}

func TestTermEndingWhileServingIs503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, nil)
		defer k.close()
		k.start("a")
		time.Sleep(leaseFor)
		a := k.reps["a"]
		a.block = make(chan struct{})
		a.store.mu.Lock()
		a.store.cut = true
		a.store.mu.Unlock()
		code, body, hdr := k.send("a", "POST", "/orders", "x")
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, "term ended") {
			t.Fatalf("%d %q: want 503, the term ended", code, body)
		}
	})
}

func TestForwardedRequestToANonLeaderGoesToTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, nil)
		defer k.close()
		k.start("a")
		time.Sleep(leaseFor)
		// b does not run: a request forwarded to it is refused, not
		// forwarded again, after a 102 that says its handler took it.
		req := httptest.NewRequest("POST", "http://b:80/orders", strings.NewReader("x"))
		req.Header.Set(forward.HopHeader, "c")
		rec := &informational{ResponseRecorder: httptest.NewRecorder()}
		k.reps["b"].h.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get(forward.NotLeaderHeader) == "" || len(k.serve) != 0 {
			t.Fatalf("%d %v, served %+v: want 503 Not-Leader, nothing served", rec.Code, rec.Header(), k.serve)
		}
		if !slices.Equal(rec.early, []int{http.StatusProcessing}) {
			t.Fatalf("informational responses %v, want one 102 first", rec.early)
		}
	})
}

// informational is a ResponseRecorder that keeps 1xx responses apart.
type informational struct {
	*httptest.ResponseRecorder
	early []int
}

func (i *informational) WriteHeader(code int) {
	if code < 200 {
		i.early = append(i.early, code)
		return
	}
	i.ResponseRecorder.WriteHeader(code)
}

func TestBodyTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, func(c *forward.Config) { c.MaxBody = 4 })
		defer k.close()
		if code, _, _ := k.send("a", "POST", "/orders", "12345"); code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d, want 413", code)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	c, _ := tenure.New(tenure.Config{Lease: "svc", Store: memlease.New()})
	for _, cfg := range []forward.Config{
		{Handler: http.NotFoundHandler()},
		{Candidate: c},
		{Candidate: c, Handler: http.NotFoundHandler(), Scheme: "ftp"},
		{Candidate: c, Handler: http.NotFoundHandler(), Hold: -1},
	} {
		if _, err := forward.New(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestDrainHandsOverWithoutFailing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t, nil)
		defer k.close()
		k.startAll()
		l := k.leader()
		old := k.reps[l]
		old.block = make(chan struct{}) // its service holds a request until the request's context ends
		inflight := make(chan int, 1)
		reqCtx, release := context.WithCancel(context.Background())
		go func() {
			req := httptest.NewRequest("POST", "http://"+l+":80/slow", strings.NewReader("x")).WithContext(reqCtx)
			rec := httptest.NewRecorder()
			old.h.(*forward.Handler).ServeHTTP(rec, req)
			inflight <- rec.Code
		}()
		synctest.Wait()
		drained := make(chan error, 1)
		go func() { drained <- old.h.(*forward.Handler).Drain(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("Drain returned (%v) with a request in flight", err)
		default:
		}
		old.block = nil
		// A request that arrives while it drains waits for the next leader.
		got := make(chan string, 1)
		go func() {
			_, body, _ := k.send(l, "POST", "/orders", "during the drain")
			got <- body
		}()
		synctest.Wait()
		release() // the in-flight request's client is done: its response is not needed
		<-inflight
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
		if err := old.c.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		body := <-got
		nl := k.leader()
		if nl == "" || nl == l || body != nl+" served POST during the drain" {
			t.Fatalf("%q, leader %q (was %q)", body, nl, l)
		}
	})
}
