// Package grpcforward routes gRPC calls to the leader of a lease, as
// package forward does HTTP requests:
//
//   - A client resolves the target "tenure:///LEASE" (NewBuilder) to the
//     address the lease's leader publishes (tenure.Config.Addr), which a
//     tenure.Watch on the store follows; while no term is known to be live
//     it resolves to nothing, and calls made with grpc.WaitForReady(true)
//     wait for the next leader.
//   - A server wraps its services in the interceptors: on the leader a call
//     runs under the term's context too (it ends when the term ends, and
//     carries the term's fence); a unary call whose term ended before it
//     returned answers Unavailable rather than its response. On a follower
//     every call answers Unavailable, with the leader's address in the
//     status's details (LeaderAddr reads it), so that a client that dialled
//     a replica directly can go to the leader.
//
// What it does not promise: a call in flight to a leader that dies may or
// may not have been served; a streaming call whose term ends midway has
// sent what it sent.
package grpcforward

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/internal/termctx"
	"github.com/tenure-go/tenure/lease"
)

// Scheme is the resolver's: targets are "tenure:///LEASE".
const Scheme = "tenure"

// Domain and Reason name the ErrorInfo a follower's Unavailable carries;
// its metadata "leader" is the leader's address ("" if none is known).
const (
	Domain = "tenure.dev"
	Reason = "NOT_LEADER"
)

// NewBuilder returns the resolver of targets "tenure:///LEASE": the leader
// of LEASE in store, followed by a tenure.Watch with timing (its
// PollInterval, with tenure's defaults for the fields left zero). Pass it
// to grpc.NewClient with grpc.WithResolvers.
func NewBuilder(store lease.Store, timing tenure.Timing) resolver.Builder {
	return &builder{store: store, timing: timing}
}

type builder struct {
	store  lease.Store
	timing tenure.Timing
}

func (b *builder) Scheme() string { return Scheme }

func (b *builder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	name := strings.TrimPrefix(t.URL.Path, "/")
	if t.URL.Host != "" || name == "" {
		return nil, fmt.Errorf("grpcforward: target %q: want tenure:///LEASE", t.URL.String())
	}
	cfg := tenure.WatchConfig{Lease: name, Store: b.store, Timing: b.timing}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("grpcforward: target %q: %w", t.URL.String(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		err := tenure.Watch(ctx, cfg, func(o tenure.Observation) {
			if o.Addr == "" {
				cc.ReportError(fmt.Errorf("grpcforward: lease %q has no leader known to be live", name))
				return
			}
			_ = cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: o.Addr}}})
		})
		if err != nil {
			cc.ReportError(err)
		}
	}()
	return r, nil
}

// watcher is a target's resolver: a Watch of its lease.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// ResolveNow does nothing: the Watch reads every PollInterval.
func (*watcher) ResolveNow(resolver.ResolveNowOptions) {}

func (w *watcher) Close() {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
}

// UnaryServerInterceptor serves unary calls on c's leader, and answers
// them Unavailable elsewhere.
func UnaryServerInterceptor(c *tenure.Candidate) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		term, ok := c.TermContext()
		if !ok {
			return nil, notLeader(c)
		}
		ctx, stop := termctx.Join(ctx, term)
		defer stop()
		resp, err := handler(ctx, req)
		if term.Err() != nil {
			return nil, status.Error(codes.Unavailable, "grpcforward: the term ended while the call was served: its outcome is unknown to this replica")
		}
		return resp, err
	}
}

// StreamServerInterceptor serves streaming calls on c's leader, under its
// term, and answers them Unavailable elsewhere.
func StreamServerInterceptor(c *tenure.Candidate) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		term, ok := c.TermContext()
		if !ok {
			return notLeader(c)
		}
		ctx, stop := termctx.Join(ss.Context(), term)
		defer stop()
		return handler(srv, &stream{ServerStream: ss, ctx: ctx})
	}
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// notLeader is a follower's answer: Unavailable, with where the leader is.
func notLeader(c *tenure.Candidate) error {
	addr := c.Status().Leader.Addr
	st := status.New(codes.Unavailable, "grpcforward: this replica does not lead")
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: Reason, Domain: Domain, Metadata: map[string]string{"leader": addr}}); err == nil {
		st = d
	}
	return st.Err()
}

// LeaderAddr returns the leader's address that a follower's Unavailable
// carries, and whether err is such an answer ("" when no leader was known).
func LeaderAddr(err error) (string, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return "", false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == Domain && info.Reason == Reason {
			return info.Metadata["leader"], true
		}
	}
	return "", false
}
