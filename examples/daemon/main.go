// Command daemon is a long-running service that embeds a Candidate: every
// replica serves the probes (/livez for liveness, /readyz for readiness,
// /leader to route to the leader alone) and /metrics (Prometheus), only the
// leader does the work, and SIGTERM shuts it down gracefully: the work
// stops, the lease is released, the server drains.
//
//	go run ./examples/daemon -addr 127.0.0.1:9464 -store file:///tmp/tenure-daemon
//	go run ./examples/daemon -addr 127.0.0.1:9465 -store file:///tmp/tenure-daemon
//	curl -s 127.0.0.1:9464/livez; curl -s 127.0.0.1:9464/leader; curl -s 127.0.0.1:9464/metrics | grep '^tenure_'
//
// Stop the leader with Ctrl-C (or kill -TERM) and watch the other take over
// within a poll. -store takes any store URL (package lease/storeurl).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease/storeurl"
)

func main() {
	var (
		addr     = flag.String("addr", "127.0.0.1:9464", "where to serve the probes and /metrics")
		storeURL = flag.String("store", "file:///tmp/tenure-daemon", "store URL")
		name     = flag.String("lease", "examples/daemon", "lease name")
		leaseFor = flag.Duration("lease-duration", 10*time.Second, "lease duration")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, *storeURL, *name, *leaseFor, log); err != nil {
		log.Error("daemon", "err", err)
		os.Exit(1)
	}
}

func run(addr, storeURL, name string, leaseFor time.Duration, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	store, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	// Metrics: an OpenTelemetry MeterProvider read by Prometheus.
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	c, err := tenure.New(tenure.Config{
		Lease: name, Store: store, Timing: tenure.Timing{LeaseDuration: leaseFor}, Payload: []byte(addr),
		Runtime: tenure.Runtime{Logger: log, MeterProvider: mp},
		Callbacks: tenure.Callbacks{
			OnElected: work(clock.New(), printLine),
			OnDemoted: func(t tenure.Term, r tenure.DemotionReason) {
				log.Info("no longer leading", "token", t.Token, "reason", r)
			},
		},
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/", c.Handler()) // /livez, /readyz, /leader; 404 elsewhere
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// Every connection timed out, idle ones too: a client that holds
	// connections open must not take the descriptors the store needs.
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ListenAndServe() }()
	log.Info("serving", "addr", "http://"+addr, "id", c.ID())

	// Run until SIGTERM: it ends the term (the work's context), waits for
	// the callbacks, releases the lease, and returns.
	runErr := c.Run(ctx)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if errors.Is(runErr, context.Canceled) {
		return nil
	}
	return runErr
}

// work is the leader's job: every two seconds by clk, while the term
// lasts, write, with the term's context (which carries its fence). It takes
// its time from a clock, not from package time, so that main_test.go runs
// it in the simulator.
func work(clk tenure.Clock, write func(ctx context.Context)) func(ctx context.Context, t tenure.Term) {
	return func(ctx context.Context, t tenure.Term) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-clk.After(2 * time.Second):
			}
			if err := fencing.Err(ctx); err != nil {
				return
			}
			write(ctx)
		}
	}
}

// printLine is the daemon's write: a line carrying the term's fence, as a
// write to a fenced resource would.
func printLine(ctx context.Context) {
	f, _ := fencing.FromContext(ctx)
	fmt.Printf("%s  leading with token %d\n", time.Now().Format(time.TimeOnly), f.Token)
}
