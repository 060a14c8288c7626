package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"golang.org/x/sync/semaphore"
)

// telemetry serves, on --metrics-addr, /metrics (Prometheus text: the
// OpenTelemetry instruments of the Candidate or Locker and of the child,
// and the Go runtime's and the process's) and the probes of the Candidate
// or Locker (/livez, /readyz, /leader; /healthz as /readyz). Nothing
// listens without the flag, and no endpoint changes anything. Nothing a
// client does to the port can reach the lease: connections are capped,
// and every one is timed out, idle ones included.
type telemetry struct {
	mp     metric.MeterProvider
	probes atomic.Pointer[http.Handler]
	child  *childMetrics
	srv    *http.Server
	ln     net.Listener
}

// maxConns bounds the connections the server holds open; more wait in the
// kernel's backlog. Probes and scrapes need a few.
const maxConns = 16

// newTelemetry listens on addr; with addr "" it serves nothing and its
// MeterProvider records nothing. service names the process in the
// metrics' resource (service.name), unless OTEL_SERVICE_NAME does.
func newTelemetry(addr, service string, stderr io.Writer) (*telemetry, error) {
	t := &telemetry{mp: noop.NewMeterProvider()}
	if addr == "" {
		t.child = newChildMetrics(t.mp)
		return t, nil
	}
	reader := sdkmetric.NewManualReader()
	res, err := resource.New(context.Background(), resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	t.child = newChildMetrics(t.mp)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := collect(r.Context(), reader, w); err != nil {
			fmt.Fprintf(stderr, "tenure: metrics: %v\n", err)
		}
	})
	probe := func(w http.ResponseWriter, r *http.Request) {
		h := t.probes.Load()
		if h == nil {
			if r.URL.Path == "/livez" {
				writeJSON(w, http.StatusOK, `{"healthy":true,"reason":"starting"}`)
				return
			}
			writeJSON(w, http.StatusServiceUnavailable, `{"healthy":false,"reason":"starting"}`)
			return
		}
		(*h).ServeHTTP(w, r)
	}
	for _, p := range []string{"/livez", "/readyz", "/leader", "/healthz"} {
		mux.HandleFunc("GET "+p, probe)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	t.ln = &limitListener{Listener: ln, sem: semaphore.NewWeighted(maxConns), done: make(chan struct{})}
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 8 << 10}
	go func() {
		if err := t.srv.Serve(t.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "tenure: metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "tenure: serving /metrics, /livez, /readyz and /leader on http://%s\n", t.ln.Addr())
	return t, nil
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintln(w, body)
}

// setProbes makes h (a Candidate's or a Locker's Handler) answer the
// probes.
func (t *telemetry) setProbes(h http.Handler) { t.probes.Store(&h) }

func (t *telemetry) addr() string {
	if t.ln == nil {
		return ""
	}
	return t.ln.Addr().String()
}

func (t *telemetry) close() {
	if t.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = t.srv.Shutdown(ctx)
		_ = t.srv.Close()
	}
	if p, ok := t.mp.(*sdkmetric.MeterProvider); ok {
		_ = p.Shutdown(context.Background())
	}
}

// limitListener accepts a connection only while fewer than the
// semaphore's weight are open, so that a client that opens connections and
// holds them cannot take the descriptors the store's calls need.
type limitListener struct {
	net.Listener
	sem       *semaphore.Weighted
	done      chan struct{} // closed by Close: Accept stops waiting
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := l.sem.Acquire(ctx, 1); err != nil {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.sem.Release(1)
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { l.sem.Release(1) })}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// childMetrics are the instruments of the command tenure runs.
type childMetrics struct {
	running  atomic.Int64
	status   atomic.Int64 // the last exit status; -1 before the first
	starts   atomic.Int64
	restarts metric.Int64Counter
}

func newChildMetrics(mp metric.MeterProvider) *childMetrics {
	m := mp.Meter("github.com/tenure-go/tenure/cmd/tenure")
	c := &childMetrics{}
	c.status.Store(-1)
	c.restarts, _ = m.Int64Counter("tenure.child.restarts", metric.WithDescription("Commands started again after the first."), metric.WithUnit("{start}"))
	running, _ := m.Int64ObservableGauge("tenure.child.running", metric.WithDescription("1 while the command runs, else 0."))
	status, _ := m.Int64ObservableGauge("tenure.child.exit_status", metric.WithDescription("The command's last exit status (128+N: signal N); -1 before it first exits."))
	_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(running, c.running.Load())
		o.ObserveInt64(status, c.status.Load())
		return nil
	}, running, status)
	return c
}

func (c *childMetrics) started() {
	c.running.Store(1)
	if c.starts.Add(1) > 1 {
		c.restarts.Add(context.Background(), 1)
	}
}

func (c *childMetrics) exited(status int) {
	c.running.Store(0)
	c.status.Store(int64(status))
}
