package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// These tests run real Candidates in a synctest bubble: time is fake and
// advances only when every goroutine is blocked, so hours pass in
// milliseconds and every instant is exact. At default timings (10s lease):
// renewals every 2s, lead window 8.99s after a renewal's send, takeover
// 10.01s after a version was first seen.

const leaseName = "test/lease"

// tok returns the n-th token of a lease created at the start of a synctest
// bubble: a new record's token is the writer's Unix time in milliseconds.
func tok(n int) fencing.Token {
	return fencing.Token(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()) + fencing.Token(n-1)
}

// wait lets d of fake time pass.
func wait(d time.Duration) { <-time.After(d) }

// term is one leadership term as the callbacks saw it.
type term struct {
	node      string
	token     fencing.Token
	elected   time.Time // OnElected called
	cancelled time.Time // the term's context done
	demoted   time.Time // OnDemoted called
	reason    tenure.DemotionReason
	ctx       context.Context
}

// world records the callbacks of every candidate of a test and checks the
// callback contract as they arrive.
type world struct {
	t     *testing.T
	store lease.Store

	mu      sync.Mutex // guards the fields below
	terms   []*term
	open    map[string]*term // node → current term
	busy    map[string]bool  // node → inside a callback
	leaders []string         // OnLeaderChange reports, "node saw leader"
}

func newWorld(t *testing.T) *world {
	return &world{t: t, store: memlease.New(), open: map[string]*term{}, busy: map[string]bool{}}
}

func (w *world) enter(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy[node] {
		w.t.Errorf("%s: callbacks overlap", node)
	}
	w.busy[node] = true
}

func (w *world) leave(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy[node] = false
}

// callbacks returns checked callbacks for node; work, if not nil, runs inside
// OnElected after the bookkeeping.
func (w *world) callbacks(node string, work func(ctx context.Context)) tenure.Callbacks {
	return tenure.Callbacks{
		OnElected: func(ctx context.Context, tm tenure.Term) {
			w.enter(node)
			defer w.leave(node)
			tr := &term{node: node, token: tm.Token, elected: time.Now(), ctx: ctx}
			w.mu.Lock()
			if w.open[node] != nil {
				w.t.Errorf("%s: OnElected twice without OnDemoted", node)
			}
			w.open[node] = tr
			// Terms of different nodes must not overlap in (fake, shared) time.
			for _, o := range w.terms {
				if o.node != node && (o.cancelled.IsZero() || o.cancelled.After(tr.elected)) {
					w.t.Errorf("%s elected at %v while %s (token %d) still leads", node, tr.elected, o.node, o.token)
				}
			}
			if n := len(w.terms); n > 0 && w.terms[n-1].token >= tm.Token {
				w.t.Errorf("%s: token %d not above the previous term's %d", node, tm.Token, w.terms[n-1].token)
			}
			w.terms = append(w.terms, tr)
			w.mu.Unlock()
			if f, ok := fencing.FromContext(ctx); !ok || f != tm.Fence() {
				w.t.Errorf("%s: term context carries %+v, %v; want %+v", node, f, ok, tm.Fence())
			}
			context.AfterFunc(ctx, func() {
				w.mu.Lock()
				if tr.cancelled.IsZero() { // OnDemoted may have run first: AfterFunc's goroutine is not ordered with it
					tr.cancelled = time.Now()
				}
				w.mu.Unlock()
			})
			if work != nil {
				work(ctx)
			}
		},
		OnDemoted: func(tm tenure.Term, reason tenure.DemotionReason) {
			w.enter(node)
			defer w.leave(node)
			w.mu.Lock()
			defer w.mu.Unlock()
			tr := w.open[node]
			if tr == nil {
				w.t.Errorf("%s: OnDemoted without OnElected", node)
				return
			}
			if tr.ctx.Err() == nil {
				w.t.Errorf("%s: OnDemoted before the term's context was cancelled", node)
			}
			if tm.Token != tr.token {
				w.t.Errorf("%s: OnDemoted token %d, OnElected had %d", node, tm.Token, tr.token)
			}
			tr.demoted, tr.reason = time.Now(), reason
			if tr.cancelled.IsZero() {
				tr.cancelled = tr.demoted // cancelled by now, as checked above
			}
			delete(w.open, node)
		},
		OnLeaderChange: func(l tenure.Leader) {
			// Delivered on a goroutine of its own: it may overlap the others.
			w.enter(node + "/leader")
			defer w.leave(node + "/leader")
			w.mu.Lock()
			w.leaders = append(w.leaders, node+" saw "+l.Holder)
			w.mu.Unlock()
		},
	}
}

// node is one running Candidate.
type node struct {
	c      *tenure.Candidate
	faults *leasetest.Faults
	cancel context.CancelFunc
	done   chan error
}

func (w *world) start(id string, work func(ctx context.Context), edit ...func(*tenure.Config)) *node {
	w.t.Helper()
	f := leasetest.NewFaults(w.store)
	cfg := tenure.Config{
		Lease: leaseName,
		Store: f,
		Runtime: tenure.Runtime{
			ID:   id,
			Rand: rand.New(rand.NewPCG(uint64(len(id)), uint64(id[len(id)-1]))),
		},
		Callbacks: w.callbacks(id, work),
	}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := tenure.New(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{c: c, faults: f, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- c.Run(ctx) }()
	// Should the test fail early, stop n anyway: a bubble must end with no
	// goroutine left.
	w.t.Cleanup(func() { n.faults.Heal(); n.stop() })
	return n
}

// stop cancels n's Run and returns its result. It may be called again.
func (n *node) stop() error {
	n.cancel()
	err := <-n.done
	n.done <- err
	return err
}

func (w *world) snapshot() []term {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []term
	for _, t := range w.terms {
		out = append(out, *t)
	}
	return out
}

func (w *world) lastTerm() term {
	w.t.Helper()
	ts := w.snapshot()
	if len(ts) == 0 {
		w.t.Fatal("no term yet")
	}
	return ts[len(ts)-1]
}

func TestFirstElection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		t0 := time.Now()
		a := w.start("a", nil)
		synctest.Wait()
		tm := w.lastTerm()
		if tm.node != "a" || tm.token != tok(1) || !tm.elected.Equal(t0) {
			t.Fatalf("term = %+v, want a elected at once with token 1", tm)
		}
		st := a.c.Status()
		if !st.Leading || st.Token != tok(1) || st.Leader.Holder != "a" || !st.Deadline.Equal(t0.Add(8990*time.Millisecond)) {
			t.Fatalf("status = %+v", st)
		}
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		if tm := w.lastTerm(); tm.reason != tenure.ReasonShutDown {
			t.Fatalf("reason = %v", tm.reason)
		}
	})
}

func TestSteadyRenewalOverHours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", nil)
		synctest.Wait()
		b, c := w.start("b", nil), w.start("c", nil)
		wait(3 * time.Hour)
		if ts := w.snapshot(); len(ts) != 1 || ts[0].node != "a" || !ts[0].cancelled.IsZero() {
			t.Fatalf("terms = %+v, want one unbroken term of a", ts)
		}
		_, puts := a.faults.Counts()
		if want := int(3 * time.Hour / (2 * time.Second)); puts < want || puts > want+2 {
			t.Fatalf("a wrote %d times in 3h, want about %d renewals", puts, want)
		}
		for _, n := range []*node{b, c} {
			// Polls are drawn in [1.8s, 2.2s]: 5,400 in 3h on average, give
			// or take about 4 (one standard deviation).
			if gets, puts := n.faults.Counts(); puts != 0 || gets < 5346 || gets > 5454 {
				t.Fatalf("follower: %d gets, %d puts; want polls only, every 2s on average (5,400 ± 1%%)", gets, puts)
			}
			if st := n.c.Status(); st.Leading || st.Leader.Holder != "a" {
				t.Fatalf("follower status = %+v", st)
			}
		}
		for _, n := range []*node{b, c, a} {
			if err := n.stop(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestCrashFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", nil)
		synctest.Wait()
		b := w.start("b", nil)
		wait(time.Minute)
		// a crashes: it reaches the store no more and releases nothing.
		a.faults.FailAll()
		crash := time.Now()
		if err := a.stop(); !errors.Is(err, leasetest.ErrInjected) {
			t.Fatalf("a's Run = %v, want a release error", err)
		}
		wait(time.Minute)
		tm := w.lastTerm()
		if tm.node != "b" || tm.token != tok(2) {
			t.Fatalf("after the crash: %+v, want b with token 2", tm)
		}
		// b saw a's last renewal at most 2s before the crash, waits 10.01s
		// from then, and polls at most every 2.2s.
		if d := tm.elected.Sub(crash); d < 10010*time.Millisecond-2*time.Second || d > 10010*time.Millisecond+2200*time.Millisecond {
			t.Fatalf("failover took %v", d)
		}
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGracefulHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", nil)
		synctest.Wait()
		b := w.start("b", nil)
		wait(time.Minute)
		release := time.Now()
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		wait(10 * time.Second)
		tm := w.lastTerm()
		if tm.node != "b" || tm.token != tok(2) {
			t.Fatalf("after release: %+v, want b with token 2", tm)
		}
		if d := tm.elected.Sub(release); d > 2200*time.Millisecond {
			t.Fatalf("handoff took %v, want at most the longest poll (2.2s)", d)
		}
		rec, _, err := w.store.Get(context.Background(), leaseName)
		if err != nil || rec.Holder != "b" || rec.Released {
			t.Fatalf("record = %+v, %v", rec, err)
		}
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
		rec, _, err = w.store.Get(context.Background(), leaseName)
		if err != nil || !rec.Released || rec.Token != uint64(tok(2)) {
			t.Fatalf("after b's release: %+v, %v; want released with token 2 kept", rec, err)
		}
	})
}

// TestStoreErrorsDemoteAtDeadline: elected at 0, renewed at 2s and 4s, cut
// off at 5s: the term ends exactly at 4s + 8.99s, not an instant earlier.
func TestStoreErrorsDemoteAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		t0 := time.Now()
		a := w.start("a", nil)
		wait(5 * time.Second)
		a.faults.FailAll()
		wait(12990*time.Millisecond - 5*time.Second - 1)
		if st := a.c.Status(); !st.Leading {
			t.Fatalf("demoted before the deadline: %+v", st)
		}
		wait(1)
		synctest.Wait()
		tm := w.lastTerm()
		if want := t0.Add(12990 * time.Millisecond); !tm.cancelled.Equal(want) {
			t.Fatalf("term cancelled at %v, want %v", tm.cancelled.Sub(t0), want.Sub(t0))
		}
		if tm.reason != tenure.ReasonStoreUnavailable {
			t.Fatalf("reason = %v", tm.reason)
		}
		st := a.c.Status()
		if st.Leading || !errors.Is(st.Err, leasetest.ErrInjected) {
			t.Fatalf("status = %+v", st)
		}
		a.faults.Heal()
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConflictDemotesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		t0 := time.Now()
		a := w.start("a", nil)
		wait(5 * time.Second)
		// Someone takes the lease behind a's back (say, an operator).
		ctx := context.Background()
		rec, ver, err := w.store.Get(ctx, leaseName)
		if err != nil {
			t.Fatal(err)
		}
		rec.Holder, rec.Token, rec.Nonce = "intruder", rec.Token+1, "x"
		if _, err := w.store.Put(ctx, leaseName, rec, ver); err != nil {
			t.Fatal(err)
		}
		wait(time.Second) // a renews at 6s
		synctest.Wait()
		tm := w.lastTerm()
		if want := t0.Add(6 * time.Second); !tm.cancelled.Equal(want) || tm.reason != tenure.ReasonLost {
			t.Fatalf("term ended at %v (%v), want at %v, lost", tm.cancelled.Sub(t0), tm.reason, want.Sub(t0))
		}
		if st := a.c.Status(); st.Leading || st.Leader.Holder != "intruder" {
			t.Fatalf("status = %+v", st)
		}
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(w.leaders, ", "); got != "a saw a, a saw intruder" {
			t.Fatalf("leader changes: %s", got)
		}
	})
}

// TestSlowCallbacks: a leader whose OnElected ignores its context for a
// minute, and followers whose OnLeaderChange takes 30s, do not stop renewals.
func TestSlowCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", func(ctx context.Context) { wait(time.Minute) })
		synctest.Wait()
		slow := func(c *tenure.Config) {
			next := c.Callbacks.OnLeaderChange
			c.Callbacks.OnLeaderChange = func(l tenure.Leader) { wait(30 * time.Second); next(l) }
		}
		b := w.start("b", nil, slow)
		wait(59 * time.Second)
		if _, puts := a.faults.Counts(); puts < 29 {
			t.Fatalf("%d writes in 59s while OnElected blocks, want a renewal every 2s", puts)
		}
		if st := a.c.Status(); !st.Leading {
			t.Fatalf("a lost its lease while its callback was slow: %+v", st)
		}
		if len(w.snapshot()) != 1 {
			t.Fatalf("terms: %+v", w.snapshot())
		}
		for _, n := range []*node{b, a} {
			if err := n.stop(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestShutdownWaitsForCallbacks: Run returns only after OnElected returned,
// OnDemoted ran and the lease was released.
func TestShutdownWaitsForCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var finished time.Time
		a := w.start("a", func(ctx context.Context) {
			<-ctx.Done()
			wait(3 * time.Second) // cleanup after the term ended
			finished = time.Now()
		})
		wait(time.Second)
		stopped := time.Now()
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		tm := w.lastTerm()
		if !tm.cancelled.Equal(stopped) || tm.demoted.Before(finished) || !finished.Equal(stopped.Add(3*time.Second)) {
			t.Fatalf("cancelled %v, work finished %v, demoted %v (stop at %v)", tm.cancelled, finished, tm.demoted, stopped)
		}
		rec, _, _ := w.store.Get(context.Background(), leaseName)
		if !rec.Released {
			t.Fatalf("not released: %+v", rec)
		}
	})
}

func TestLostResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		a := w.start("a", nil)
		synctest.Wait()
		// The renewal at 2s applies, but its answer is lost: a reads it back
		// and keeps its term.
		a.faults.LosePutResponses(1)
		wait(3 * time.Second)
		if st := a.c.Status(); !st.Leading || st.Token != tok(1) {
			t.Fatalf("after a lost renewal response: %+v", st)
		}
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		// A takeover whose answer is lost: b learns from the read-back that
		// it leads.
		b := w.start("b", nil)
		b.faults.LosePutResponses(1)
		synctest.Wait()
		if tm := w.lastTerm(); tm.node != "b" || tm.token != tok(2) {
			t.Fatalf("after a lost takeover response: %+v", tm)
		}
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
		if ts := w.snapshot(); len(ts) != 2 {
			t.Fatalf("terms = %+v", ts)
		}
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := tenure.New(tenure.Config{Lease: "x", Store: memlease.New()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Run(ctx); !errors.Is(err, tenure.ErrRunning) {
			t.Fatalf("second Run = %v", err)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	store := memlease.New()
	for _, tc := range []struct {
		name string
		cfg  tenure.Config
		want string
	}{
		{"no lease", tenure.Config{Store: store}, "tenure: config: Lease: lease: invalid name: empty"},
		{"bad lease", tenure.Config{Lease: "a b", Store: store}, "Lease: lease: invalid name"},
		{"no store", tenure.Config{Lease: "x"}, "Store is nil"},
		{"drift", tenure.Config{Lease: "x", Store: store, Timing: tenure.Timing{MaxDrift: 0.2}}, "MaxDrift 0.2 must lie within [0, 0.1]"},
		{"renew too slow", tenure.Config{Lease: "x", Store: store, Timing: tenure.Timing{RenewInterval: 8 * time.Second}}, "no room to retry a renewal"},
		{"margin", tenure.Config{Lease: "x", Store: store, Timing: tenure.Timing{Margin: 10 * time.Second}}, "leaves no lead window"},
		{"negative", tenure.Config{Lease: "x", Store: store, Timing: tenure.Timing{PollInterval: -time.Second}}, "PollInterval -1s must be positive"},
		{"payload", tenure.Config{Lease: "x", Store: store, Payload: make([]byte, 2000)}, "Payload is 2000 bytes"},
		{"id", tenure.Config{Lease: "x", Store: store, Runtime: tenure.Runtime{ID: "bad\x00id"}}, "ID \"bad\\x00id\" must be printable"},
		{"lease too long", tenure.Config{Lease: "x", Store: store, Timing: tenure.Timing{LeaseDuration: 48 * time.Hour}}, "LeaseDuration 48h0m0s must lie within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tenure.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
			var fe *election.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "tenure: config: "+fe.Field) {
				t.Fatalf("New = %v: no *election.FieldError naming the field", err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	given := tenure.Config{Lease: "x", Store: memlease.New()}
	if err := given.Validate(); err != nil {
		t.Fatal(err)
	}
	if given.LeaseDuration != 0 || given.ID != "" || given.Clock != nil || given.Rand != nil {
		t.Fatalf("Validate changed the config: %+v", given)
	}
	cfg := given.WithDefaults()
	got := fmt.Sprint(cfg.LeaseDuration, cfg.RenewInterval, cfg.PollInterval, cfg.OpTimeout, cfg.RetryMin, cfg.RetryMax, cfg.Margin, cfg.ReleaseTimeout, cfg.MaxDrift)
	if want := "10s 2s 2s 2s 100ms 1s 1s 5s 0.001"; got != want {
		t.Fatalf("defaults = %s, want %s", got, want)
	}
	if cfg.ID == "" || cfg.Clock == nil || cfg.Rand == nil {
		t.Fatalf("ID, Clock or Rand not filled in: %+v", cfg)
	}
	if other := given.WithDefaults(); other.ID == cfg.ID {
		t.Fatalf("two candidates got the same default ID %q", cfg.ID)
	}
}

// TestRandomFaults runs three candidates for simulated hours while the store
// slows down, fails, loses answers and cuts nodes off at random; the world's
// checks (no overlapping terms, rising tokens, callback order) must hold
// throughout, and a leader must be back once the faults stop.
func TestRandomFaults(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				var mu sync.Mutex // guards rng
				latency := func(string, string) error {
					mu.Lock()
					d := time.Duration(rng.ExpFloat64() * float64(30*time.Millisecond))
					if rng.IntN(50) == 0 {
						d = time.Duration(rng.Int64N(int64(5 * time.Second))) // long tail, past OpTimeout
					}
					mu.Unlock()
					wait(d)
					return nil
				}
				w := newWorld(t)
				var nodes []*node
				for _, id := range []string{"a", "b", "c"} {
					n := w.start(id, nil)
					n.faults.SetHook(latency)
					nodes = append(nodes, n)
				}
				for range 200 {
					mu.Lock()
					n := nodes[rng.IntN(len(nodes))]
					fault, pause := rng.IntN(4), time.Duration(rng.Int64N(int64(30*time.Second)))
					mu.Unlock()
					switch fault {
					case 0:
						n.faults.FailAll() // cut off
					case 1:
						n.faults.LosePutResponses(1)
					case 2:
						n.faults.FailNext(3)
					case 3:
						n.faults.Heal()
					}
					wait(pause)
				}
				for _, n := range nodes {
					n.faults.Heal()
				}
				healed := time.Now()
				wait(30 * time.Second)
				leaders := 0
				for _, n := range nodes {
					if n.c.Status().Leading {
						leaders++
					}
				}
				if leaders != 1 {
					t.Fatalf("%d leaders 30s after healing at %v", leaders, healed)
				}
				if len(w.snapshot()) < 2 {
					t.Errorf("only %d terms: the faults did not bite", len(w.snapshot()))
				}
				for _, n := range nodes {
					if err := n.stop(); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}

// valueStore records, per call, the value of storeCtxKey on the call's context.
type valueStore struct {
	lease.Store
	mu   sync.Mutex
	seen []any
}

type storeCtxKey struct{}

func (s *valueStore) note(ctx context.Context) {
	s.mu.Lock()
	s.seen = append(s.seen, ctx.Value(storeCtxKey{}))
	s.mu.Unlock()
}

func (s *valueStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	s.note(ctx)
	return s.Store.Get(ctx, name)
}

func (s *valueStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	s.note(ctx)
	return s.Store.Put(ctx, name, rec, expect)
}

// The values of Run's context (a trace, a request's credentials) reach
// every store call, the release after the context is done included.
func TestRunContextValuesReachTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &valueStore{Store: memlease.New()}
		c, err := tenure.New(tenure.Config{Lease: leaseName, Store: st, Runtime: tenure.Runtime{ID: "a"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), storeCtxKey{}, "v"))
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(st.seen) < 3 { // a read, the takeover, the release
			t.Fatalf("%d store calls", len(st.seen))
		}
		for i, v := range st.seen {
			if v != "v" {
				t.Fatalf("call %d of %d saw %v, not Run's context value", i+1, len(st.seen), v)
			}
		}
	})
}
