package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

func standbyOn(c *tenure.Config) { c.Standby = true }

// leaseReads counts n's reads of the lease itself, not of its standby
// record, from now on.
func leaseReads(n *node) *atomic.Int64 {
	var reads atomic.Int64
	n.faults.SetHook(func(op, name string) error {
		if op == "get" && name == leaseName {
			reads.Add(1)
		}
		return nil
	})
	return &reads
}

// standbys returns the nodes that report being the standby.
func standbys(nodes map[string]*node) []string {
	var out []string
	for id, n := range nodes {
		if n.c.Status().Standby {
			out = append(out, id)
		}
	}
	return out
}

// standbyGroup starts a, the leader, then b, c and d with a standby, and
// returns them two minutes later with the one standby's ID.
func standbyGroup(w *world) (*node, map[string]*node, []string) {
	w.t.Helper()
	a := w.start("a", nil, standbyOn)
	synctest.Wait()
	nodes := map[string]*node{"b": w.start("b", nil, standbyOn), "c": w.start("c", nil, standbyOn), "d": w.start("d", nil, standbyOn)}
	wait(2 * time.Minute)
	sb := standbys(nodes)
	if len(sb) != 1 {
		w.t.Fatalf("standbys %v, want one", sb)
	}
	return a, nodes, sb
}

// With Standby, one follower reads the lease every PollInterval (2s) and
// the others every ColdPollInterval (20s); the leader is never the
// standby.
func TestStandbyOneHotFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", nil, standbyOn)
		synctest.Wait()
		nodes := map[string]*node{}
		for _, id := range []string{"b", "c", "d", "e"} {
			nodes[id] = w.start(id, nil, standbyOn)
		}
		wait(2 * time.Minute)
		sb := standbys(nodes)
		if len(sb) != 1 || a.c.Status().Standby {
			t.Fatalf("standbys %v (a: %v), want one follower", sb, a.c.Status().Standby)
		}
		reads := map[string]*atomic.Int64{}
		for id, n := range nodes {
			reads[id] = leaseReads(n)
		}
		wait(time.Hour)
		for id, r := range reads {
			// 1,800 reads an hour hot, 180 cold; polls vary ±10% each, so
			// allow 3%.
			want := int64(180)
			if id == sb[0] {
				want = 1800
			}
			if got := r.Load(); got < want*97/100 || got > want*103/100 {
				t.Errorf("%s (standby %v) read the lease %d times in an hour, want about %d", id, id == sb[0], got, want)
			}
		}
		if tm := w.lastTerm(); tm.node != "a" || !tm.cancelled.IsZero() {
			t.Fatalf("terms changed: %+v", w.snapshot())
		}
	})
}

// The leader crashes: the standby takes over within the same bound as
// without a standby, as it polls every PollInterval, and gives its standby
// record back; a cold follower becomes the standby.
func TestStandbyTakesOverAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a, nodes, sb := standbyGroup(w)
		a.faults.FailAll()
		crash := time.Now()
		if err := a.stop(); !errors.Is(err, leasetest.ErrInjected) {
			t.Fatalf("a's Run = %v", err)
		}
		wait(time.Minute)
		tm := w.lastTerm()
		if tm.node != sb[0] {
			t.Fatalf("after the crash: %+v, want the standby %s", tm, sb[0])
		}
		if d := tm.elected.Sub(crash); d > 10010*time.Millisecond+2200*time.Millisecond {
			t.Fatalf("failover took %v", d)
		}
		// The new standby is a cold follower that found the record given back.
		wait(time.Minute)
		delete(nodes, sb[0])
		if now := standbys(nodes); len(now) != 1 {
			t.Fatalf("standbys after the takeover: %v, want one of the cold followers", now)
		}
	})
}

// The standby crashes: a cold follower takes its place once its record
// went unchanged for the standby's lease (3 cold polls) × (1+ρ); and when
// the leader crashes along with it, a cold follower still takes over,
// within the bound of a cold poll.
func TestStandbyCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a, nodes, sb := standbyGroup(w)
		// Leader and standby crash together.
		for _, n := range []*node{a, nodes[sb[0]]} {
			n.faults.FailAll()
		}
		crash := time.Now()
		a.stop()
		nodes[sb[0]].stop()
		delete(nodes, sb[0])
		wait(2 * time.Minute)
		tm := w.lastTerm()
		if _, ok := nodes[tm.node]; !ok {
			t.Fatalf("after both crashed: %+v, want a cold follower", tm)
		}
		// A cold follower read the lease at most 22s (a cold poll + 10%)
		// after the crash and waits 10.01s, on a clock that is exact here.
		if d := tm.elected.Sub(crash); d > 10010*time.Millisecond+22*time.Second {
			t.Fatalf("failover with no standby took %v", d)
		}
		// The old standby's record, silent, is taken by the one follower left.
		wait(3 * time.Minute)
		delete(nodes, tm.node)
		if now := standbys(nodes); len(now) != 1 {
			t.Fatalf("standbys: %v, want the last follower", now)
		}
	})
}

// Each standby setting that cannot work is refused, naming its field.
func TestStandbyConfigErrors(t *testing.T) {
	base := tenure.Config{Lease: "x", Store: memlease.New()}
	for _, c := range []struct {
		edit  func(*tenure.Config)
		field string
	}{
		{func(c *tenure.Config) { c.ColdPollInterval = time.Minute }, "ColdPollInterval"},
		{func(c *tenure.Config) { c.WakeAddr = "127.0.0.1:0" }, "WakeAddr"},
		{func(c *tenure.Config) { c.Standby, c.ColdPollInterval = true, time.Second }, "ColdPollInterval"},
		{func(c *tenure.Config) { // the standby's renewal every 3s leaves no room for retries
			c.Standby, c.ColdPollInterval, c.RenewInterval, c.OpTimeout = true, 3*time.Second, time.Second, 3400*time.Millisecond
		}, "ColdPollInterval"},
		{func(c *tenure.Config) { c.Standby, c.WakeAddr = true, ":7946" }, "WakeAddr"},
		{func(c *tenure.Config) { c.Standby, c.WakeAddr = true, "0.0.0.0:7946" }, "WakeAddr"},
		{func(c *tenure.Config) { c.Standby, c.WakeAddr = true, "no-port" }, "WakeAddr"},
		{func(c *tenure.Config) { c.Standby, c.WakeAdvertise = true, "10.0.0.1:7946" }, "WakeAdvertise"},
		{func(c *tenure.Config) { c.Standby, c.Lease = true, strings.Repeat("x", 250) }, "Lease"},
	} {
		cfg := base
		c.edit(&cfg)
		err := cfg.Validate()
		var fe *election.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: Validate() = %v, want an error naming %s", cfg, err, c.field)
		}
	}
	ok := base
	ok.Standby, ok.WakeAddr, ok.WakeAdvertise = true, ":0", "10.0.0.1:7946"
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	ok.WakeAddr, ok.WakeAdvertise = "127.0.0.1:0", ""
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

// logged collects log messages, for a test to wait on one.
type logged struct {
	mu   sync.Mutex
	msgs map[string]chan struct{}
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.msgs[r.Message]; ok {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	return nil
}
func (l *logged) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logged) WithGroup(string) slog.Handler      { return l }

// TestStandbyWakeUp runs on the real clock, with real UDP: the leader gives
// the lease back and wakes the standby, which reads at once and takes
// over. The poll interval is long, so that only the wake-up can explain
// a takeover before the test's deadline; the test waits on events, not on
// time.
func TestStandbyWakeUp(t *testing.T) {
	testWakeUp(t, func(c *tenure.Config) { c.WakeAddr = "127.0.0.1:0" })
}

// A candidate with a Priority listens for wake-ups without a WakeAddr:
// the hand-over's release must reach it first.
func TestPriorityWakesByDefault(t *testing.T) {
	testWakeUp(t, func(c *tenure.Config) { c.Priority = 5 })
}

// testWakeUp runs TestStandbyWakeUp's case, b set up by withWake.
func testWakeUp(t *testing.T, withWake func(*tenure.Config)) {
	store := memlease.New()
	const hot, woken = "standby: reading the lease every PollInterval", "woken: reading the lease"
	logs := &logged{msgs: map[string]chan struct{}{hot: make(chan struct{}), woken: make(chan struct{})}}
	elected := make(chan string, 4)
	start := func(id string, lg *slog.Logger, opts ...func(*tenure.Config)) (context.CancelFunc, chan error) {
		cfg := tenure.Config{
			Lease: leaseName, Store: store, Runtime: tenure.Runtime{ID: id, Logger: lg}, Standby: true,
			Timing: tenure.Timing{LeaseDuration: time.Minute, PollInterval: 50 * time.Second},
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) {
				elected <- id
				<-ctx.Done()
			}},
		}
		for _, o := range opts {
			o(&cfg)
		}
		c, err := tenure.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done; done <- nil })
		return cancel, done
	}
	stopA, aDone := start("a", nil)
	if id := <-elected; id != "a" {
		t.Fatalf("%s elected first", id)
	}
	_, _ = start("b", slog.New(logs), withWake)
	// b becomes the standby at once: the standby record is free. Its
	// next poll is 45s or more after its first read.
	deadline := time.After(40 * time.Second)
	select {
	case <-logs.msgs[hot]:
	case <-deadline:
		t.Fatal("b never became the standby")
	}
	stopA()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	aDone <- nil
	select {
	case id := <-elected:
		if id != "b" {
			t.Fatalf("%s elected", id)
		}
	case <-deadline:
		t.Fatal("b was not elected before its next poll: the wake-up did not arrive")
	}
	select {
	case <-logs.msgs[woken]:
	default:
		t.Fatal("b was elected without a wake-up")
	}
}

// TestStandbyRenewalNotices runs on the real clock, with real UDP: the
// leader learns the standby's address from its record and sends it a
// notice after each renewal, telling the renewal; the standby times a's
// term from them and does not read. Its own polls come 50s apart, so over
// the eight renewals the test waits for (counted at a's store, not timed),
// it reads the lease once, as it starts, and yet a's term is still known
// to be live by its clock: a's address is still in its Status, which it
// would not be a lease (3s) after that read without the notices.
func TestStandbyRenewalNotices(t *testing.T) {
	store := memlease.New()
	reads := make(chan struct{}, 16)
	bStore := leasetest.NewFaults(store)
	bStore.SetHook(func(op, name string) error {
		if op == "get" && name == leaseName {
			reads <- struct{}{}
		}
		return nil
	})
	renewals := make(chan struct{}, 64)
	aStore := leasetest.NewFaults(store)
	aStore.SetHook(func(op, name string) error {
		if op == "put" && name == leaseName {
			select {
			case renewals <- struct{}{}:
			default:
			}
		}
		return nil
	})
	elected := make(chan string, 4)
	start := func(id string, st *leasetest.Faults, edit func(*tenure.Config)) *tenure.Candidate {
		cfg := tenure.Config{
			Lease: leaseName, Store: st, Runtime: tenure.Runtime{ID: id, WakeAddr: "127.0.0.1:0"}, Standby: true, Addr: id + ":80",
			Timing: tenure.Timing{LeaseDuration: 3 * time.Second, ColdPollInterval: 2 * time.Second},
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) {
				elected <- id
				<-ctx.Done()
			}},
		}
		if edit != nil {
			edit(&cfg)
		}
		c, err := tenure.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return c
	}
	start("a", aStore, nil)
	if id := <-elected; id != "a" {
		t.Fatalf("%s elected first", id)
	}
	b := start("b", bStore, func(c *tenure.Config) { c.PollInterval, c.ColdPollInterval = 50*time.Second, 50*time.Second })
	deadline := time.After(40 * time.Second)
	select {
	case <-reads: // its first read
	case <-deadline:
		t.Fatal("b never read the lease")
	}
	for len(renewals) > 0 {
		<-renewals
	}
	for i := range 8 { // 4.8s of renewals, every 600ms: past a lease from b's read
		select {
		case <-renewals:
		case <-deadline:
			t.Fatalf("a renewed %d times", i)
		}
	}
	if n := len(reads); n != 0 {
		t.Errorf("b read the lease %d more times while a renewed: want none, its notices timed", n)
	}
	if st := b.Status(); st.Leader.Holder != "a" || st.Leader.Addr != "a:80" {
		t.Errorf("b's Status %+v: want a's term known live, from the notices", st.Leader)
	}
}
