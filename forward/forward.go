// Package forward puts a single-writer service behind its leader: every
// replica runs the service and wraps it in New's handler, and whichever
// replica a request reaches, the leader serves it.
//
//   - On the leader, while its term is live, the request runs under the
//     term's context too: it ends when the term ends, and carries the term's
//     fence (fencing.FromContext), which fencing/httpfence's Transport
//     stamps on the calls the handler makes. The response is kept until the
//     handler returns: if the term ended meanwhile, the client gets 503, not
//     a response from a replica that was no longer sure it led.
//   - On a follower, the request is forwarded to the leader's address
//     (tenure.Config.Addr, from the record every candidate reads) by a
//     reverse proxy that keeps its method, path, headers and body; or, with
//     Config.Redirect, answered 307 to it. A forwarded request carries
//     HopHeader: a replica that gets one and does not lead answers 503 with
//     NotLeaderHeader rather than forwarding it again, and the forwarder
//     tries the next leader.
//   - With no leader known to be live (an election in progress, a leader
//     gone), a request waits up to Config.Hold for one, then is answered 503
//     with Retry-After.
//   - Requests Config.Local accepts (health probes, reads any replica may
//     answer) are served where they arrive.
//
// What it does not promise: a request forwarded to a leader that dies
// while serving it may have been served or not; the forwarder answers 502
// and does not send it again. A request is sent again only when it never
// reached a leader that served it: the connection was refused, or it was
// closed before the replica's handler had the request (a replica answers a
// forwarded request 102 Processing as soon as its handler has it, so a
// connection its listener dropped as it shut down is told apart from a
// request it took), or the replica answered that it does not lead.
package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/termctx"
)

// HopHeader marks a request a replica forwarded: its value is the
// forwarder's ID. The replica that gets it answers 102 Processing at once
// (the forwarder does not pass it on), then the response. NotLeaderHeader
// marks the 503 of a replica that got a forwarded request and does not
// lead.
const (
	HopHeader       = "Tenure-Forwarded-By"
	NotLeaderHeader = "Tenure-Not-Leader"
)

// Config configures New. Candidate and Handler are required.
type Config struct {
	// Candidate is this replica's: it tells who leads, and where
	// (tenure.Config.Addr of the leader).
	Candidate *tenure.Candidate
	// Handler is the service: it serves every request while this replica
	// leads, and the Local ones always.
	Handler http.Handler
	// Redirect answers a follower's requests 307 to the leader instead of
	// forwarding them.
	Redirect bool
	// Hold is how long a request waits for a leader when none is known to
	// be live. Default: the lease's duration.
	Hold time.Duration
	// Local reports whether a request may be served by whichever replica it
	// reaches. Default: none is.
	Local func(*http.Request) bool
	// Scheme is the leader's: "http" (default) or "https".
	Scheme string
	// Transport carries forwarded requests. Default: http.DefaultTransport's
	// settings without keep-alives (a connection per request: an idle
	// connection to a leader that died would fail a request already sent).
	Transport http.RoundTripper
	// MaxBody is the most a forwarded request's body may hold: it is read
	// whole before it is sent, so that it can be sent again to the next
	// leader. Default 10 MiB; larger bodies are answered 413.
	MaxBody int64
	// Poll is how often a waiting request looks for a leader. Default
	// 25ms.
	Poll time.Duration
	// MeterProvider records tenure.forward.requests (by outcome and
	// reason) and tenure.forward.held (seconds a request waited). Default:
	// the global one.
	MeterProvider metric.MeterProvider
}

// Handler routes each request to the leader. Make it with New.
type Handler struct {
	cfg   Config
	proxy *httputil.ReverseProxy
	count metric.Int64Counter
	held  metric.Float64Histogram

	mu       sync.Mutex
	draining bool // Drain: no request is served here any more
	serving  int  // requests being served here
}

// New returns the handler that routes each request to the leader.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Candidate == nil:
		return nil, errors.New("forward: Config.Candidate is nil")
	case cfg.Handler == nil:
		return nil, errors.New("forward: Config.Handler is nil")
	case cfg.Scheme != "" && cfg.Scheme != "http" && cfg.Scheme != "https":
		return nil, fmt.Errorf("forward: Config.Scheme %q: want http or https", cfg.Scheme)
	case cfg.Hold < 0 || cfg.MaxBody < 0 || cfg.Poll < 0:
		return nil, errors.New("forward: Config.Hold, MaxBody and Poll may not be negative")
	}
	if cfg.Scheme == "" {
		cfg.Scheme = "http"
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 10 << 20
	}
	if cfg.Poll == 0 {
		cfg.Poll = 25 * time.Millisecond
	}
	if cfg.Hold == 0 {
		cfg.Hold = cfg.Candidate.LeaseDuration()
	}
	if cfg.Transport == nil {
		// A connection per forwarded request: an idle one kept to a leader
		// that has since died would fail the next request after it was
		// sent (a reset), and whether it was served could not be known;
		// a fresh one is refused at once, and the request waits for the
		// next leader.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableKeepAlives = true
		cfg.Transport = t
	}
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter("github.com/tenure-go/tenure/forward")
	h := &Handler{cfg: cfg}
	var err, e error
	h.count, e = m.Int64Counter("tenure.forward.requests", metric.WithDescription("Requests, by what became of them."), metric.WithUnit("{request}"))
	err = errors.Join(err, e)
	h.held, e = m.Float64Histogram("tenure.forward.held", metric.WithDescription("How long a request waited for a leader."), metric.WithUnit("s"))
	if err = errors.Join(err, e); err != nil {
		return nil, fmt.Errorf("forward: metrics: %w", err)
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = cfg.Scheme
			pr.Out.URL.Host = pr.Out.Host // the leader's, set by forward
			pr.SetXForwarded()
		},
		Transport: cfg.Transport,
		// The error goes back to forward, which tells a request that never
		// reached the leader from one that may have.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if p, ok := r.Context().Value(proxyErrKey{}).(*error); ok {
				*p = err
			}
		},
	}
	return h, nil
}

// Outcomes and reasons, the attributes of tenure.forward.requests.
const (
	served     = "served"     // by this replica, the leader
	local      = "local"      // Config.Local
	forwarded  = "forwarded"  // to the leader
	redirected = "redirected" // 307 to the leader
	refused    = "refused"    // answered 503, 413 or 502: see reason
)

func (h *Handler) tell(ctx context.Context, outcome, reason string) {
	attrs := []attribute.KeyValue{attribute.String("outcome", outcome)}
	if reason != "" {
		attrs = append(attrs, attribute.String("reason", reason))
	}
	h.count.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Local != nil && h.cfg.Local(r) {
		h.tell(r.Context(), local, "")
		h.cfg.Handler.ServeHTTP(w, r)
		return
	}
	hopped := r.Header.Get(HopHeader) != ""
	if hopped {
		// The forwarder learns that this handler has the request: a
		// connection closed before this was never taken, and the request
		// may go to the next leader.
		w.WriteHeader(http.StatusProcessing)
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
		if err != nil {
			h.tell(r.Context(), refused, "body")
			code := http.StatusBadRequest
			if errors.As(err, new(*http.MaxBytesError)) {
				code = http.StatusRequestEntityTooLarge
			}
			http.Error(w, err.Error(), code)
			return
		}
		body = b
	}
	start := time.Now()
	waited := false
	for {
		if ctx, ok := h.cfg.Candidate.TermContext(); ok && h.begin() {
			h.observeHold(r, start, waited)
			h.serve(w, r, ctx, body)
			h.end()
			return
		}
		// A replica that drains does not lead for this: it waits for the
		// next leader, as a follower does.
		st := h.cfg.Candidate.Status()
		if addr := st.Leader.Addr; addr != "" && !hopped && st.Leader.Holder != h.cfg.Candidate.ID() {
			h.observeHold(r, start, waited)
			if h.cfg.Redirect {
				h.tell(r.Context(), redirected, "")
				u := *r.URL
				u.Scheme, u.Host = h.cfg.Scheme, addr
				http.Redirect(w, r, u.String(), http.StatusTemporaryRedirect)
				return
			}
			if h.forward(w, r, addr, body) {
				return
			}
			// It reached no leader that served it: wait for the next.
		}
		if hopped {
			// Forwarded to this replica, which does not lead: the
			// forwarder tries the next leader, not this replica.
			h.tell(r.Context(), refused, "not_leader")
			w.Header().Set(NotLeaderHeader, "1")
			h.unavailable(w, "this replica does not lead")
			return
		}
		if time.Since(start) >= h.cfg.Hold {
			h.observeHold(r, start, true)
			h.tell(r.Context(), refused, "no_leader")
			h.unavailable(w, "no leader within "+h.cfg.Hold.String())
			return
		}
		waited = true
		select {
		case <-r.Context().Done():
			h.tell(r.Context(), refused, "client_gone")
			return
		case <-time.After(h.cfg.Poll):
		}
	}
}

// begin counts a request served here, unless the handler drains.
func (h *Handler) begin() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.draining {
		return false
	}
	h.serving++
	return true
}

func (h *Handler) end() {
	h.mu.Lock()
	h.serving--
	h.mu.Unlock()
}

// Drain makes this replica serve no more requests itself, for good (it is
// for a shutdown): from now on,
// requests wait for another leader (or are forwarded to one) as on a
// follower. It returns once the requests being served here have been
// answered, or with ctx's error. Call it before giving the lease back on
// a graceful shutdown (end Run's context once Drain returns), so that no
// request is answered 503 because the term ended under it; then shut the
// server down, which waits for the requests held for the next leader.
func (h *Handler) Drain(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	h.mu.Unlock()
	for {
		h.mu.Lock()
		n := h.serving
		h.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(h.cfg.Poll):
		}
	}
}

func (h *Handler) observeHold(r *http.Request, start time.Time, waited bool) {
	if waited {
		h.held.Record(r.Context(), time.Since(start).Seconds())
	}
}

// unavailable answers 503 with Retry-After: the next leader is a poll or so
// away.
func (h *Handler) unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(h.cfg.Poll, time.Second).Seconds()))))
	http.Error(w, "forward: "+why, http.StatusServiceUnavailable)
}

// serve runs the request on this replica, the leader, under the term's
// context as well as its own; the response goes out only if the term is
// still live once the handler returns.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, term context.Context, body []byte) {
	ctx, stop := termctx.Join(r.Context(), term)
	defer stop()
	r2 := r.Clone(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	rec := &recorder{header: http.Header{}}
	h.cfg.Handler.ServeHTTP(rec, r2)
	if term.Err() != nil {
		h.tell(r.Context(), refused, "term_ended")
		h.unavailable(w, "the term ended while the request was served: its outcome is unknown to this replica")
		return
	}
	h.tell(r.Context(), served, "")
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.code())
	_, _ = w.Write(rec.body.Bytes())
}

// recorder keeps a response until the handler returns.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// proxyErrKey is the context key under which forward gives the proxy's
// ErrorHandler where to put its error.
type proxyErrKey struct{}

// forward sends the request to the leader at addr. It reports whether it
// answered the client: not when the request never reached a leader that
// served it, and may go to the next one.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, addr string, body []byte) bool {
	var perr error
	out := r.Clone(context.WithValue(r.Context(), proxyErrKey{}, &perr))
	out.Host = addr
	out.Header.Set(HopHeader, h.cfg.Candidate.ID())
	out.Body, out.ContentLength = http.NoBody, 0
	if len(body) > 0 {
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	sw := &statusWriter{ResponseWriter: w}
	h.proxy.ServeHTTP(sw, out)
	switch {
	case perr == nil && sw.notLeader:
		return false // answered nothing yet: the next leader
	case perr == nil:
		h.tell(r.Context(), forwarded, "")
		return true
	case refusedConn(perr), !sw.taken && r.Context().Err() == nil:
		return false // it never reached the replica's handler
	case r.Context().Err() != nil:
		h.tell(r.Context(), refused, "client_gone")
		return true
	}
	h.tell(r.Context(), refused, "leader_failed")
	http.Error(w, "forward: the leader failed while serving the request, which may or may not have been served: "+perr.Error(), http.StatusBadGateway)
	return true
}

// refusedConn reports whether err shows that the request never reached the
// leader: nothing listened at its address.
func refusedConn(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// statusWriter holds back a 503 NotLeaderHeader from the leader that was
// not, so that the request can go to the next one, and the 102 that says
// the replica's handler took the request.
type statusWriter struct {
	http.ResponseWriter
	notLeader bool
	wrote     bool
	taken     bool // the replica answered 102: its handler has the request
}

func (s *statusWriter) WriteHeader(code int) {
	if code == http.StatusProcessing {
		s.taken = true
		return
	}
	if code == http.StatusServiceUnavailable && s.Header().Get(NotLeaderHeader) != "" && !s.wrote {
		s.notLeader = true
		for k := range s.Header() {
			delete(s.Header(), k)
		}
		return
	}
	s.wrote = true
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.notLeader {
		return len(p), nil
	}
	s.wrote = true
	return s.ResponseWriter.Write(p)
}
