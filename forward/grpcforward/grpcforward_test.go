package grpcforward_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/forward/grpcforward"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

const leaseFor = 2 * time.Second

// service answers UnaryCall with the replica's ID and the token of the term
// it runs under; with block, it waits for the call's context to end.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	id    string
	block bool
}

func (s *service) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if s.block {
		<-ctx.Done()
	}
	f, _ := fencing.FromContext(ctx)
	return &testgrpc.SimpleResponse{Username: s.id, OauthScope: f.Lease}, nil
}

type cutStore struct {
	lease.Store
	mu  sync.Mutex
	cut bool
}

func (s *cutStore) isCut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

func (s *cutStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.isCut() {
		return lease.Record{}, lease.NoVersion, errors.New("cut off")
	}
	return s.Store.Get(ctx, name)
}

func (s *cutStore) Put(ctx context.Context, name string, rec lease.Record, v lease.Version) (lease.Version, error) {
	if s.isCut() {
		return lease.NoVersion, errors.New("cut off")
	}
	return s.Store.Put(ctx, name, rec, v)
}

// replica is a candidate and its gRPC server on an in-memory listener.
type replica struct {
	c     *tenure.Candidate
	store *cutStore
	lis   *bufconn.Listener
	srv   *grpc.Server
	svc   *service
}

type cluster struct {
	mem  *memlease.Store
	reps map[string]*replica
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newCluster(t *testing.T) *cluster {
	k := &cluster{mem: memlease.New(), reps: map[string]*replica{}}
	k.ctx, k.stop = context.WithCancel(context.Background())
	for _, id := range []string{"a", "b", "c"} {
		r := &replica{store: &cutStore{Store: k.mem}, lis: bufconn.Listen(1 << 16), svc: &service{id: id}}
		c, err := tenure.New(tenure.Config{Lease: "svc", Store: r.store, Addr: id + ":80",
			Timing: tenure.Timing{LeaseDuration: leaseFor}, Runtime: tenure.Runtime{ID: id}})
		if err != nil {
			t.Fatal(err)
		}
		r.c = c
		r.srv = grpc.NewServer(grpc.UnaryInterceptor(grpcforward.UnaryServerInterceptor(c)),
			grpc.StreamInterceptor(grpcforward.StreamServerInterceptor(c)))
		testgrpc.RegisterTestServiceServer(r.srv, r.svc)
		k.wg.Go(func() { _ = r.srv.Serve(r.lis) })
		k.wg.Go(func() { _ = c.Run(k.ctx) })
		k.reps[id] = r
	}
	return k
}

func (k *cluster) close() {
	for _, r := range k.reps {
		r.srv.Stop()
	}
	k.stop()
	k.wg.Wait()
}

// dial reaches "id:80" over the replica's in-memory listener.
func (k *cluster) dial(ctx context.Context, addr string) (net.Conn, error) {
	id, _, _ := net.SplitHostPort(addr)
	if r := k.reps[id]; r != nil {
		return r.lis.DialContext(ctx)
	}
	return nil, errors.New("no such host")
}

func (k *cluster) leader() string {
	for id, r := range k.reps {
		if r.c.Status().Leading {
			return id
		}
	}
	return ""
}

func TestResolverFollowsTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t)
		defer k.close()
		time.Sleep(leaseFor)
		cc, err := grpc.NewClient("tenure:///svc",
			grpc.WithResolvers(grpcforward.NewBuilder(k.mem, tenure.Timing{LeaseDuration: leaseFor})),
			grpc.WithContextDialer(k.dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		client := testgrpc.NewTestServiceClient(cc)
		call := func() (*testgrpc.SimpleResponse, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*leaseFor)
			defer cancel()
			return client.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.WaitForReady(true))
		}
		l := k.leader()
		resp, err := call()
		if err != nil || resp.Username != l || resp.OauthScope != "svc" {
			t.Fatalf("%v %v: want served by %s under the term's fence", resp, err, l)
		}
		// The leader is cut off and its server stops: the next call waits
		// for the next leader.
		k.reps[l].store.mu.Lock()
		k.reps[l].store.cut = true
		k.reps[l].store.mu.Unlock()
		k.reps[l].srv.Stop()
		resp, err = call()
		if nl := k.leader(); err != nil || nl == "" || nl == l || resp.Username != nl {
			t.Fatalf("%v %v: want served by the next leader (%q, was %q)", resp, err, nl, l)
		}
	})
}

func TestFollowerAnswersUnavailableWithTheLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t)
		defer k.close()
		time.Sleep(leaseFor)
		l := k.leader()
		f := "a"
		if f == l {
			f = "b"
		}
		cc, err := grpc.NewClient("passthrough:///"+f+":80", grpc.WithContextDialer(k.dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		_, err = testgrpc.NewTestServiceClient(cc).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if addr, ok := grpcforward.LeaderAddr(err); !ok || addr != l+":80" || status.Code(err) != codes.Unavailable {
			t.Fatalf("%v: want Unavailable naming %s:80", err, l)
		}
	})
}

func TestTermEndingWhileServingIsUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newCluster(t)
		defer k.close()
		time.Sleep(leaseFor)
		l := k.leader()
		r := k.reps[l]
		r.svc.block = true
		cc, err := grpc.NewClient("passthrough:///"+l+":80", grpc.WithContextDialer(k.dial), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		r.store.mu.Lock()
		r.store.cut = true
		r.store.mu.Unlock()
		resp, err := testgrpc.NewTestServiceClient(cc).UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable || resp != nil {
			t.Fatalf("%v %v: want Unavailable once the term ended", resp, err)
		}
	})
}

func TestBadTarget(t *testing.T) {
	cc, err := grpc.NewClient("tenure://host/svc", grpc.WithResolvers(grpcforward.NewBuilder(memlease.New(), tenure.Timing{})),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err == nil {
		cc.Connect()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = testgrpc.NewTestServiceClient(cc).EmptyCall(ctx, &testgrpc.Empty{})
		cc.Close()
	}
	if err == nil {
		t.Fatal("tenure://host/svc: no error")
	}
}
