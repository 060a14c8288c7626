package tenure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/redislease"
)

// TestIntegrationRedisFailoverLosesATakeover: a Redis primary with a
// replica; the link between them drops what it carries, so that what the
// primary acknowledges next is not replicated; b takes the lease there and writes
// to a fenced resource; the primary dies (SIGKILL), the replica is
// promoted (REPLICAOF NO ONE), and every client follows it. b's
// takeover is lost: the new primary holds a's last renewal.
//
// What holds: c, cut off since before the lost writes, takes the record
// a left, with a token above b's although it never saw b's (every takeover
// on a Lossy store mints at least the wall time in ms); the resource
// refuses b's writes once c has written; b's next renewal finds the record
// foreign and its term ends. What cannot be promised: b still believes
// until then (its renewal interval and a call's timeout at most), while c
// already leads; the test logs how long that was.
func TestIntegrationRedisFailoverLosesATakeover(t *testing.T) {
	primary := testservers.StartRedis(t)
	// The replica follows the primary through a proxy, which can drop what
	// the primary sends: a SIGSTOPped replica would still read it from its
	// socket once resumed.
	link := testservers.NewProxy(t, primary.Addr)
	replica := testservers.StartRedis(t, "--replicaof", "127.0.0.1", portOf(link.Addr()))
	admin := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	pAdmin, rAdmin := admin(primary.Addr), admin(replica.Addr)
	ctx := t.Context()
	waitReplicated := func() {
		t.Helper()
		if n, err := pAdmin.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
			t.Fatalf("WAIT 1: %d replicas acknowledged, %v", n, err)
		}
	}
	waitReplicated() // the replica is in sync

	xa, xb, xc := testservers.NewProxy(t, primary.Addr), testservers.NewProxy(t, primary.Addr), testservers.NewProxy(t, primary.Addr)
	storeVia := func(x *testservers.Proxy) *redislease.Store {
		c := redis.NewClient(&redis.Options{Addr: x.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		s, err := redislease.New(c, redislease.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ev := newEvents()
	cSaw := make(chan lease.Version, 64)
	a := runLossy(t, storeVia(xa), "a", ev)
	ea := ev.nextElected(t, e2eTakeover)
	if ea.id != "a" {
		t.Fatalf("%s elected first", ea.id)
	}
	runLossy(t, storeVia(xb), "b", ev)
	runLossy(t, seeing{storeVia(xc), cSaw}, "c", ev)
	ev.waitSeenAll(t, e2eTakeover, "b saw a", "c saw a")

	// a goes silent, and c learns of its last renewal (from the feed, or
	// a read) before it is cut off too.
	xa.Blackhole()
	last := lastVersion(t, pAdmin)
	for heard := false; !heard; {
		select {
		case v := <-cSaw:
			heard = v == last
		case <-time.After(e2eTakeover):
			t.Fatalf("c never came upon a's last renewal %q", last)
		}
	}
	xc.Blackhole()
	waitReplicated()
	link.Blackhole() // from here on the primary's writes reach no replica

	eb, write := takeoverThenWrite(t, ev, ea) // b waits out a's lease, on the primary alone

	// The failover: the primary dies with b's takeover unreplicated.
	primary.Kill()
	if err := rAdmin.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	failover := time.Now()
	for _, x := range []*testservers.Proxy{xa, xb, xc} {
		x.Retarget(replica.Addr)
	}
	xc.Pass()

	ec := ev.nextElected(t, e2eTakeover)
	if ec.id != "c" {
		t.Fatalf("%s elected after the failover, want c", ec.id)
	}
	if ec.term.Token <= eb.term.Token {
		t.Fatalf("c's token %d is not above b's lost %d: tokens went back", ec.term.Token, eb.term.Token)
	}
	if err := write(ec.term); err != nil {
		t.Fatalf("c's write: %v", err)
	}
	if err := write(eb.term); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("b's write after c's: %v, want it refused (%v)", err, fencing.ErrStaleToken)
	}
	d := ev.nextDemoted(t, e2eTakeover)
	for d.id == "a" { // a's term ended when it went silent
		d = ev.nextDemoted(t, e2eTakeover)
	}
	if d.id != "b" || d.reason != tenure.ReasonLost {
		t.Fatalf("%s demoted (%v), want b, its lease lost", d.id, d.reason)
	}
	overlap := max(d.at.Sub(ec.at), 0)
	t.Logf("b's takeover lost in the failover; c elected %v after it (token %d > b's %d); b believed for %v while c led",
		ec.at.Sub(failover).Round(time.Millisecond), ec.term.Token, eb.term.Token, overlap.Round(time.Millisecond))
	a()
}

// runLossy runs a Candidate on store as it is (runCandidate's fault
// wrapper would hide that the store is Lossy and has a feed); the
// returned func stops it, as the test's cleanup does.
func runLossy(t *testing.T, store lease.Store, id string, ev *events) func() {
	t.Helper()
	cfg := e2eConfig(store, id, ev)
	if l := testLogger(t); l != nil {
		cfg.Runtime.Logger = l.With("id", id)
	}
	c, err := tenure.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// seeing is a Redis store that tells which versions its reads and its
// feed came upon.
type seeing struct {
	*redislease.Store
	saw chan<- lease.Version
}

func (s seeing) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	rec, v, err := s.Store.Get(ctx, name)
	if err == nil {
		s.tell(v)
	}
	return rec, v, err
}

func (s seeing) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	return s.Store.Watch(ctx, name, func(e lease.Event) {
		s.tell(e.Version)
		fn(e)
	})
}

func (s seeing) tell(v lease.Version) {
	select {
	case s.saw <- v:
	default: // nobody waits
	}
}

// lastVersion returns the version the lease's hash holds on a server.
func lastVersion(t *testing.T, c *redis.Client) lease.Version {
	t.Helper()
	v, err := c.HGet(t.Context(), redislease.DefaultPrefix+"e2e/leader", "v").Result()
	if err != nil {
		t.Fatal(err)
	}
	return lease.Version(v)
}

// takeoverThenWrite waits for b to take the lease from a, with a higher
// token, and has b write to a fenced resource; it returns b's election and
// the resource's write.
func takeoverThenWrite(t *testing.T, ev *events, ea electedEvent) (electedEvent, func(tenure.Term) error) {
	t.Helper()
	eb := ev.nextElected(t, e2eTakeover)
	if eb.id != "b" || eb.term.Token <= ea.term.Token {
		t.Fatalf("%s elected with token %d after a's %d; want b above it", eb.id, eb.term.Token, ea.term.Token)
	}
	guard := new(fencing.Guard)
	write := func(term tenure.Term) error {
		return guard.Do("e2e/leader", term.Token, func() error { return nil })
	}
	if err := write(eb.term); err != nil {
		t.Fatalf("b's first write: %v", err)
	}
	return eb, write
}

// portOf returns the port of HOST:PORT.
func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}
