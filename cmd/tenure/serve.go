package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// telemetry serves /metrics (Prometheus text, from the OpenTelemetry
// instruments of the Candidate or Locker) and /healthz (its Handler) on
// --metrics-addr. Nothing listens without the flag, and neither endpoint
// changes anything.
type telemetry struct {
	mp     metric.MeterProvider
	health atomic.Pointer[http.Handler]
	srv    *http.Server
	ln     net.Listener
}

// newTelemetry listens on addr; with addr "" it serves nothing and its
// MeterProvider records nothing.
func newTelemetry(addr string, stderr io.Writer) (*telemetry, error) {
	t := &telemetry{mp: noop.NewMeterProvider()}
	if addr == "" {
		return t, nil
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := t.health.Load()
		if h == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	})
	t.ln, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := t.srv.Serve(t.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "tenure: metrics server: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "tenure: serving /metrics and /healthz on http://%s\n", t.ln.Addr())
	return t, nil
}

func (t *telemetry) setHealth(h http.Handler) { t.health.Store(&h) }

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
	}
	if p, ok := t.mp.(*sdkmetric.MeterProvider); ok {
		_ = p.Shutdown(context.Background())
	}
}
