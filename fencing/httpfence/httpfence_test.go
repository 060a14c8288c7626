package httpfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/httpfence"
)

// resource is what a fenced service protects: a log of the tokens whose
// writes it applied.
type resource struct {
	mu      sync.Mutex // guards applied
	applied []fencing.Token
}

func (res *resource) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := fencing.FromContext(r.Context())
	if !ok {
		http.Error(w, "no fence in the handler's context", http.StatusInternalServerError)
		return
	}
	res.mu.Lock()
	res.applied = append(res.applied, f.Token)
	res.mu.Unlock()
	fmt.Fprintf(w, "applied %v", f)
}

func (res *resource) log() []fencing.Token {
	res.mu.Lock()
	defer res.mu.Unlock()
	return slices.Clone(res.applied)
}

func newServer(t *testing.T, cfg httpfence.Config, next http.Handler) *httptest.Server {
	t.Helper()
	h, err := httpfence.Handler(cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func fencedClient(srv *httptest.Server) *http.Client {
	return &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
}

// post sends a write under f (none if f is zero) and returns the response
// with its body read.
func post(t *testing.T, c *http.Client, url string, f fencing.Fence) (*http.Response, string) {
	t.Helper()
	ctx := context.Background()
	if f != (fencing.Fence{}) {
		ctx = fencing.NewContext(ctx, f)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST under %v: %v", f, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestTransportSendsFence(t *testing.T) {
	var got atomic.Pointer[http.Header]
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h := r.Header.Clone()
		got.Store(&h)
	}))
	defer srv.Close()
	c := fencedClient(srv)

	f := fencing.Fence{Lease: "jobs/cron", Token: 42}
	req, _ := http.NewRequestWithContext(fencing.NewContext(context.Background(), f), http.MethodPut, srv.URL, nil)
	req.Header.Set(httpfence.TokenHeader, "1") // replaced: the context is the source of truth
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := *got.Load()
	if h.Get(httpfence.TokenHeader) != "42" || h.Get(httpfence.LeaseHeader) != "jobs/cron" {
		t.Errorf("server saw %s=%q %s=%q, want 42 and jobs/cron", httpfence.TokenHeader, h.Get(httpfence.TokenHeader), httpfence.LeaseHeader, h.Get(httpfence.LeaseHeader))
	}
	if req.Header.Get(httpfence.TokenHeader) != "1" || req.Header.Get(httpfence.LeaseHeader) != "" {
		t.Errorf("the caller's request was modified: %v", req.Header)
	}

	// No fence in the context: sent as it is.
	resp, err = c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := *got.Load(); h.Get(httpfence.TokenHeader) != "" || h.Get(httpfence.LeaseHeader) != "" {
		t.Errorf("a request without a fence arrived with fence headers: %v", h)
	}

	// An invalid fence sends nothing.
	n := requests.Load()
	req, _ = http.NewRequestWithContext(fencing.NewContext(context.Background(), fencing.Fence{Lease: "a b", Token: 1}), http.MethodPut, srv.URL, nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Error("a request with an invalid fence was sent")
	}
	if requests.Load() != n {
		t.Error("the server received a request with an invalid fence")
	}
}

// A leader paused past its lease wakes and sends its write after the next
// leader has written: the service refuses it with 409, says why, and the
// resource keeps the newer write.
func TestHandlerRefusesStaleToken(t *testing.T) {
	res := &resource{}
	srv := newServer(t, httpfence.Config{}, res)
	c := fencedClient(srv)

	for _, tok := range []fencing.Token{1, 1, 2} {
		resp, body := post(t, c, srv.URL, fencing.Fence{Lease: "jobs/cron", Token: tok})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token %d: %s %q", tok, resp.Status, body)
		}
		if err := httpfence.CheckResponse(resp); err != nil {
			t.Errorf("CheckResponse(200) = %v", err)
		}
	}
	resp, body := post(t, c, srv.URL, fencing.Fence{Lease: "jobs/cron", Token: 1})
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("stale token: %s, want 409", resp.Status)
	}
	if want := `fencing: lease "jobs/cron": token 1 is stale, token 2 was already accepted`; strings.TrimSpace(body) != want {
		t.Errorf("body %q, want %q", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	var se *fencing.StaleTokenError
	if err := httpfence.CheckResponse(resp); !errors.As(err, &se) || *se != (fencing.StaleTokenError{Lease: "jobs/cron", Presented: 1, Current: 2}) {
		t.Errorf("CheckResponse = %v, want StaleTokenError{jobs/cron, 1, 2}", err)
	}
	if got, want := res.log(), []fencing.Token{1, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("resource applied %v, want %v", got, want)
	}
}

// An application's own 409 is not a fencing refusal.
func TestCheckResponseIgnoresOtherConflicts(t *testing.T) {
	srv := newServer(t, httpfence.Config{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "version mismatch", http.StatusConflict)
	}))
	resp, _ := post(t, fencedClient(srv), srv.URL, fencing.Fence{Lease: "a", Token: 1})
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("status %s", resp.Status)
	}
	if err := httpfence.CheckResponse(resp); err != nil {
		t.Errorf("CheckResponse of the handler's own 409 = %v, want nil", err)
	}
}

func TestHandlerUnfenced(t *testing.T) {
	res := &resource{}
	srv := newServer(t, httpfence.Config{}, res)
	resp, body := post(t, fencedClient(srv), srv.URL, fencing.Fence{})
	if resp.StatusCode != http.StatusPreconditionRequired || !strings.Contains(body, httpfence.TokenHeader) {
		t.Errorf("unfenced request: %s %q, want 428 naming the header", resp.Status, body)
	}
	if err := httpfence.CheckResponse(resp); !errors.Is(err, httpfence.ErrUnfenced) {
		t.Errorf("CheckResponse(428) = %v, want ErrUnfenced", err)
	}
	if n := len(res.log()); n != 0 {
		t.Errorf("the handler ran %d times for unfenced requests", n)
	}

	var sawFence atomic.Bool
	open := newServer(t, httpfence.Config{AllowUnfenced: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := fencing.FromContext(r.Context())
		sawFence.Store(ok)
	}))
	resp, body = post(t, fencedClient(open), open.URL, fencing.Fence{})
	if resp.StatusCode != http.StatusOK || sawFence.Load() {
		t.Errorf("AllowUnfenced: %s %q, fence in context %t; want 200 and none", resp.Status, body, sawFence.Load())
	}
}

func TestHandlerBadHeaders(t *testing.T) {
	ran := false
	h, err := httpfence.Handler(httpfence.Config{}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]http.Header{
		"not a decimal number": {httpfence.TokenHeader: {"abc"}, httpfence.LeaseHeader: {"a"}},
		"tokens start at 1":    {httpfence.TokenHeader: {"0"}, httpfence.LeaseHeader: {"a"}},
		"leading zero":         {httpfence.TokenHeader: {"07"}, httpfence.LeaseHeader: {"a"}},
		"repeated":             {httpfence.TokenHeader: {"1", "2"}, httpfence.LeaseHeader: {"a"}},
		"without":              {httpfence.LeaseHeader: {"a"}},
		"header missing":       {httpfence.TokenHeader: {"1"}},
		"printable":            {httpfence.TokenHeader: {"1"}, httpfence.LeaseHeader: {"a b"}},
	}
	for reason, hdr := range tests {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header = hdr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), reason) {
			t.Errorf("headers %v: %d %q, want 400 saying %q", hdr, w.Code, w.Body.String(), reason)
		}
	}
	if ran {
		t.Error("the handler ran for a malformed request")
	}
}

func TestHandlerOneLease(t *testing.T) {
	var g fencing.Guard
	var seen atomic.Pointer[fencing.Fence]
	srv := newServer(t, httpfence.Config{Guard: &g, Lease: "jobs/cron"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := fencing.FromContext(r.Context())
		seen.Store(&f)
	}))

	// Without Fencing-Lease the server's lease is meant.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	req.Header.Set(httpfence.TokenHeader, "3")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || *seen.Load() != (fencing.Fence{Lease: "jobs/cron", Token: 3}) || g.Highest("jobs/cron") != 3 {
		t.Fatalf("%s, handler saw %v, Highest %d", resp.Status, seen.Load(), g.Highest("jobs/cron"))
	}

	resp, body := post(t, fencedClient(srv), srv.URL, fencing.Fence{Lease: "jobs/other", Token: 9})
	var we *fencing.WrongLeaseError
	if err := httpfence.CheckResponse(resp); resp.StatusCode != http.StatusConflict || !errors.As(err, &we) ||
		we.Current != (fencing.Fence{Lease: "jobs/cron", Token: 3}) || we.Presented != (fencing.Fence{Lease: "jobs/other", Token: 9}) {
		t.Errorf("another lease: %s %q, CheckResponse %v; want 409 and a WrongLeaseError", resp.Status, body, err)
	}
	if g.Highest("jobs/other") != 0 {
		t.Error("the other lease's token was recorded")
	}
}

// The zombie's write is a request whose handler stalls mid-way (the pause
// falls after the check). In Exclusive and Shared mode the next term's request
// waits until the stalled handler has finished, so the newer write always
// lands last; in ContextOnly mode nothing holds it back, which is why that
// mode is only for handlers fenced downstream.
func TestHandlerRunsUnderGuard(t *testing.T) {
	for _, tt := range []struct {
		mode httpfence.Mode
		want []string
	}{
		{httpfence.Exclusive, []string{"1 starts", "1 ends", "2 writes"}},
		{httpfence.Shared, []string{"1 starts", "1 ends", "2 writes"}},
		{httpfence.ContextOnly, []string{"1 starts", "2 writes", "1 ends"}},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex // guards log
				var log []string
				record := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
				wake := make(chan struct{})
				h, err := httpfence.Handler(httpfence.Config{Mode: tt.mode}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					f, _ := fencing.FromContext(r.Context())
					if f.Token == 1 {
						record("1 starts")
						<-wake // paused after its check, before its write
						record("1 ends")
						return
					}
					record(fmt.Sprintf("%d writes", f.Token))
				}))
				if err != nil {
					t.Fatal(err)
				}
				serve := func(tok fencing.Token) {
					r := httptest.NewRequest(http.MethodPost, "/", nil)
					httpfence.SetHeader(r.Header, fencing.Fence{Lease: "a", Token: tok})
					h.ServeHTTP(httptest.NewRecorder(), r)
				}
				var wg sync.WaitGroup
				wg.Go(func() { serve(1) })
				synctest.Wait()
				wg.Go(func() { serve(2) })
				synctest.Wait()
				close(wake)
				wg.Wait()
				if !slices.Equal(log, tt.want) {
					t.Errorf("%v: %q, want %q", tt.mode, log, tt.want)
				}
			})
		})
	}
}

// In Shared mode the handlers of one term run concurrently: each of these
// waits for all to be inside (synctest reports a deadlock if they ran one at
// a time).
func TestHandlerSharedConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g fencing.Guard
		// The first request of a term runs alone; later ones share.
		if err := g.Do("a", 5, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		const n = 3
		var inside sync.WaitGroup
		inside.Add(n)
		h, err := httpfence.Handler(httpfence.Config{Guard: &g, Mode: httpfence.Shared}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inside.Done()
			inside.Wait()
		}))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				r := httptest.NewRequest(http.MethodPost, "/", nil)
				httpfence.SetHeader(r.Header, fencing.Fence{Lease: "a", Token: 5})
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Errorf("status %d", w.Code)
				}
			})
		}
		wg.Wait()
	})
}

// Many writers with interleaved tokens race through real HTTP: the resource
// applies tokens in non-decreasing order, the highest last, and every refusal
// is a StaleTokenError naming a higher token.
func TestHandlerRacingWriters(t *testing.T) {
	for _, mode := range []httpfence.Mode{httpfence.Exclusive, httpfence.Shared} {
		t.Run(mode.String(), func(t *testing.T) {
			res := &resource{}
			srv := newServer(t, httpfence.Config{Mode: mode, Lease: "a"}, res)
			c := fencedClient(srv)
			const writers, calls = 8, 15
			var refused atomic.Int32
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range calls {
						f := fencing.Fence{Lease: "a", Token: fencing.Token(i + w%4 + 1)}
						resp, body := post(t, c, srv.URL, f)
						switch err := httpfence.CheckResponse(resp); {
						case resp.StatusCode == http.StatusOK:
						case errors.Is(err, fencing.ErrStaleToken):
							refused.Add(1)
							var se *fencing.StaleTokenError
							if errors.As(err, &se); se.Current <= f.Token {
								t.Errorf("%v refused by %v", f, se)
							}
						default:
							t.Errorf("%v: %s %q, CheckResponse %v", f, resp.Status, body, err)
						}
					}
				})
			}
			wg.Wait()
			log := res.log()
			if !slices.IsSorted(log) {
				t.Errorf("tokens applied out of order: %v", log)
			}
			if want := fencing.Token(calls - 1 + 3 + 1); len(log) == 0 || log[len(log)-1] != want {
				t.Errorf("last token applied %v, want %d", log[max(len(log)-1, 0):], want)
			}
			if refused.Load() == 0 {
				t.Log("no request was refused this run")
			}
		})
	}
}

func TestHandlerConfig(t *testing.T) {
	ok := http.NotFoundHandler()
	if _, err := httpfence.Handler(httpfence.Config{Mode: httpfence.Mode(9)}, ok); err == nil {
		t.Error("Handler accepted Mode(9)")
	}
	if _, err := httpfence.Handler(httpfence.Config{Lease: "a b"}, ok); err == nil {
		t.Error("Handler accepted an invalid Lease")
	}
	if _, err := httpfence.Handler(httpfence.Config{}, nil); err == nil {
		t.Error("Handler accepted a nil handler")
	}
}

// A request under a term that is over by its own clock is not sent.
func TestTransportRefusesEndedTerm(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	ended := errors.New("term over")
	ctx := fencing.WithTerm(fencing.NewContext(context.Background(), fencing.Fence{Lease: "a", Token: 2}), func() error { return ended })
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &httpfence.Transport{}}
	if _, err := client.Do(req); !errors.Is(err, ended) {
		t.Fatalf("Do = %v, want the term's end", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the request reached the server")
	}
}
