package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing/httpfence"
	"github.com/tenure-go/tenure/forward"
	"github.com/tenure-go/tenure/lease"
)

const forwardUsage = `usage: tenure forward [flags] NAME

Puts a service that runs on every replica behind the leader of the lease
NAME: tenure campaigns for NAME and listens on --listen, in front of this
replica's service (--to). Whichever replica a client reaches (a load
balancer, a Kubernetes Service in front of every pod), the leader's service
answers: no label to flip, no readiness to gate.

--mode http (the default): on the leader, each request goes to --to under
the term, with its fencing token in the Fencing-Token header (and the lease
in Fencing-Lease) for the service to hand to what it writes; a request
whose term ends before its response is answered 503,
never a response from a replica that was no longer sure it led. On a
follower it goes to the leader's tenure (the address the leader publishes,
its --addr), or is answered 307 there with --redirect. With no leader known
to be live it waits up to --hold, then is answered 503 with Retry-After.
Requests under the paths --local names (e.g. /healthz) stay on their
replica. A request in flight when the leader dies may or may not have been
served: it is answered 502, not sent again.

--mode tcp: on the leader, each connection to --listen is piped to --to; on
a follower, to the leader's --peer listener, which pipes it to its service
only while it leads and closes it otherwise. A leader's connections are
closed when its term ends. With no leader a connection waits up to --hold,
then is closed.

--addr is where the other replicas reach this one: the host (or IP) and
port of --listen in http mode, of --peer in tcp mode. tenure status shows
the leader's.

On SIGINT or SIGTERM a leader hands over without failing a request: it
serves no more requests itself (in http mode, once those in flight are
answered), gives the lease back, goes on forwarding what it holds to the
next leader while its server drains (up to --hold), and exits.

exit status: 0 once interrupted (SIGINT, SIGTERM), after the lease is
given back; 2 for bad flags; 69 when the store refuses us for good; 1 when
a listener fails.

examples:
  tenure forward --listen :8080 --to 127.0.0.1:9090 --addr "$POD_IP:8080" --local /healthz writer
  tenure forward --mode tcp --listen :5432 --peer :15432 --addr "$POD_IP:15432" --to 127.0.0.1:6432 db-writer
`

// forwardCommand implements "tenure forward".
func forwardCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure forward", forwardUsage, stderr)
	var c common
	c.register(fs)
	leaseFor := fs.Duration("lease", 10*time.Second, "lease duration; the other timings derive from it")
	id := fs.String("id", "", "holder identity, unique per process (default: host-pid-random)")
	listen := fs.String("listen", "", "where clients connect, e.g. :8080 (required)")
	to := fs.String("to", "", "this replica's service, e.g. 127.0.0.1:9090 (required)")
	addr := fs.String("addr", "", "where the other replicas reach this one: host:port of --listen (http) or --peer (tcp) (required)")
	mode := fs.String("mode", "http", "http or tcp")
	peer := fs.String("peer", "", "tcp mode: where the other replicas' connections arrive, e.g. :15432 (required in tcp mode)")
	hold := fs.Duration("hold", 0, "how long a request or connection waits for a leader (default: the lease)")
	redirect := fs.Bool("redirect", false, "http mode: answer a follower's requests 307 to the leader instead of forwarding them")
	local := fs.String("local", "", "http mode: comma-separated path prefixes served by whichever replica a request reaches, e.g. /healthz,/metrics")
	if ok, status := parseFlags(fs, args, stderr); !ok {
		return status
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tenure forward: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() != 1:
		usageError(fs, stderr, "want one lease NAME")
		return exitUsage
	case *listen == "" || *to == "" || *addr == "":
		return bad("--listen, --to and --addr are required")
	case *mode != "http" && *mode != "tcp":
		return bad("--mode %q: want http or tcp", *mode)
	case *mode == "tcp" && *peer == "":
		return bad("--mode tcp needs --peer, where the other replicas' connections arrive")
	case *mode == "http" && *peer != "":
		return bad("--peer is for --mode tcp: in http mode the replicas reach each other on --listen")
	case *leaseFor < minLease:
		return bad("--lease %v: the shortest that works is %v", *leaseFor, minLease)
	case *hold < 0:
		return bad("--hold %v: want a positive duration", *hold)
	}
	if _, _, err := net.SplitHostPort(*to); err != nil {
		return bad("--to %q: %v", *to, err)
	}
	name := fs.Arg(0)
	log := c.logger(stderr, "forward")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, status := c.open(ctx, "tenure forward", stderr)
	if store == nil {
		return status
	}
	cand, err := tenure.New(tenure.Config{Lease: name, Store: store, Addr: *addr,
		Timing: tenure.Timing{LeaseDuration: *leaseFor}, Runtime: tenure.Runtime{ID: *id, Logger: c.libLogger(log)},
		Callbacks: tenure.Callbacks{
			OnElected: func(_ context.Context, t tenure.Term) {
				log.Info(fmt.Sprintf("elected, token %d: serving through %s", t.Token, *to), "token", t.Token)
			},
			OnDemoted: func(t tenure.Term, r tenure.DemotionReason) {
				log.Info(fmt.Sprintf("no longer leading (%v)", r), "token", t.Token)
			},
		}})
	if err != nil {
		fmt.Fprintf(stderr, "tenure forward: %s\n", bare(err))
		return exitUsage
	}
	if *hold == 0 {
		*hold = *leaseFor
	}
	f := &forwarder{c: cand, to: *to, hold: *hold, log: log}
	var serve func(context.Context) error
	if *mode == "http" {
		serve, err = f.http(*listen, *redirect, *local)
	} else {
		serve, err = f.tcp(*listen, *peer)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tenure forward: %v\n", err)
		return 1
	}
	log.Info(fmt.Sprintf("campaigning for %q in %s as %q; %s on %s, published as %s, in front of %s", name, c.store, cand.ID(), *mode, *listen, *addr, *to))
	// The campaign and the server have contexts of their own: a SIGTERM
	// hands over first (drain, resign), and stops them after.
	rctx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	sctx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	served := make(chan error, 1)
	go func() { served <- serve(sctx) }()
	runErr := make(chan error, 1)
	go func() { runErr <- cand.Run(rctx) }()
	exit := 0
	select {
	case <-ctx.Done(): // SIGINT, SIGTERM: hand over, then stop
		f.handOver()
		stopServe()
		<-served
		stopRun()
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(stderr, "tenure forward: %v\n", err)
			exit = 1
		}
	case err := <-served: // a listener failed: give the lease back
		stopRun()
		<-runErr
		fmt.Fprintf(stderr, "tenure forward: %v\n", err)
		return 1
	case err := <-runErr:
		stopServe()
		<-served
		if errors.Is(err, lease.ErrPermanent) {
			fmt.Fprintf(stderr, "tenure forward: %v\n", err)
			return exitUnavailable
		}
		if err != nil {
			fmt.Fprintf(stderr, "tenure forward: %v\n", err)
			return 1
		}
	}
	if exit != 0 {
		return exit
	}
	log.Info("stopped: the lease is given back")
	return 0
}

// forwarder is what the modes share.
type forwarder struct {
	c    *tenure.Candidate
	to   string
	hold time.Duration
	log  *slog.Logger
	h    *forward.Handler // http mode
}

// handOver ends this replica's part as the leader, if it leads, without
// failing a request: it serves no more requests itself (http: once those
// in flight are answered), gives the lease back, and goes on forwarding to
// the next leader while the server drains.
func (f *forwarder) handOver() {
	ctx, cancel := context.WithTimeout(context.Background(), f.hold)
	defer cancel()
	f.log.Info("handing over: no more requests served here; those in flight are answered first")
	if f.h != nil {
		if err := f.h.Drain(ctx); err != nil {
			f.log.Warn("requests still served here after the hold: the term ends under them", "hold", f.hold)
		}
	}
	if _, ok := f.c.TermContext(); ok {
		if err := f.c.Resign(ctx); err != nil {
			f.log.Warn("the lease could not be given back: the next leader waits for it to run out", "err", err)
		}
	}
}

// http returns the http mode's server, listening on listen.
func (f *forwarder) http(listen string, redirect bool, local string) (func(context.Context) error, error) {
	backend := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: f.to})
	// The service gets the term's fence as headers (Fencing-Token,
	// Fencing-Lease), to hand to what it writes.
	backend.Transport = &httpfence.Transport{}
	var prefixes []string
	for _, p := range strings.Split(local, ",") {
		if p = strings.TrimSpace(p); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	h, err := forward.New(forward.Config{Candidate: f.c, Handler: backend, Redirect: redirect, Hold: f.hold,
		Local: func(r *http.Request) bool {
			for _, p := range prefixes {
				if strings.HasPrefix(r.URL.Path, p) {
					return true
				}
			}
			return false
		}})
	if err != nil {
		return nil, err
	}
	f.h = h
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), f.hold+5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shut)
			<-done
			return nil
		}
	}, nil
}

// tcp returns the tcp mode's server: clients on listen, the other
// replicas' connections on peer.
func (f *forwarder) tcp(listen, peer string) (func(context.Context) error, error) {
	cl, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	pl, err := net.Listen("tcp", peer)
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		accept := func(ln net.Listener, handle func(context.Context, net.Conn)) {
			for {
				conn, err := ln.Accept()
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				wg.Go(func() { handle(ctx, conn) })
			}
		}
		wg.Go(func() { accept(cl, f.client) })
		wg.Go(func() { accept(pl, f.peer) })
		var err error
		select {
		case <-ctx.Done():
		case err = <-errs:
		}
		_ = cl.Close()
		_ = pl.Close()
		wg.Wait()
		return err
	}, nil
}

// client serves a client's connection: to the service while leading, to
// the leader's peer listener otherwise, waiting up to the hold for one.
func (f *forwarder) client(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	deadline := time.Now().Add(f.hold)
	for {
		if term, ok := f.c.TermContext(); ok {
			f.pipe(ctx, term, conn, f.to)
			return
		}
		if addr := f.c.Status().Leader.Addr; addr != "" {
			if f.pipe(ctx, nil, conn, addr) {
				return
			}
		}
		if time.Now().After(deadline) {
			f.log.Warn("no leader within the hold: connection closed", "hold", f.hold, "from", conn.RemoteAddr().String())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// peer serves another replica's connection: only while leading.
func (f *forwarder) peer(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	if term, ok := f.c.TermContext(); ok {
		f.pipe(ctx, term, conn, f.to)
	}
}

// pipe copies between conn and a connection to addr until either side
// ends, ctx is done, or the term (if any) ends. It reports whether addr
// answered the dial.
func (f *forwarder) pipe(ctx, term context.Context, conn net.Conn, addr string) bool {
	d := net.Dialer{Timeout: 5 * time.Second}
	up, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
	var ended <-chan struct{}
	if term != nil {
		ended = term.Done()
	}
	select {
	case <-done:
		<-done
	case <-ended: // its term ended: no longer served by this replica
	case <-ctx.Done():
	}
	_ = conn.Close()
	_ = up.Close()
	return true
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
