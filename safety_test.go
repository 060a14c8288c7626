package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
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

// logs records what a Candidate logs.
type logs struct {
	mu   sync.Mutex
	recs []string // "LEVEL msg k=v ..."
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}

// count returns how many records start with level and contain every part.
func (l *logs) count(level slog.Level, parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, r := range l.recs {
		if !strings.HasPrefix(r, level.String()+" ") {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}

// run starts c.Run(ctx) and returns a function that cancels it and
// returns its error.
func run(t *testing.T, c *tenure.Candidate, ctx context.Context) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func newCandidate(t *testing.T, cfg tenure.Config) *tenure.Candidate {
	t.Helper()
	if cfg.Lease == "" {
		cfg.Lease = leaseName
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(1, uint64(len(cfg.ID))))
	}
	c, err := tenure.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An OnElected that ignores its context keeps its candidate from
// campaigning: the term ends at its deadline, the candidate warns, and it
// takes the lease again only once OnElected has returned, as a new term
// with its own OnElected.
func TestWedgedOnElectedBlocksCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewFaults(memlease.New())
		log := &logs{}
		unblock := make(chan struct{})
		var mu sync.Mutex
		var elected []fencing.Token
		demoted := 0
		c := newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a", Logger: slog.New(log)}, Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) {
				mu.Lock()
				elected = append(elected, term.Token)
				n := len(elected)
				mu.Unlock()
				if n == 1 {
					<-unblock // blocked in a syscall, say: the context is ignored
				}
			},
			OnDemoted: func(tenure.Term, tenure.DemotionReason) { mu.Lock(); demoted++; mu.Unlock() },
		}})
		run(t, c, context.Background())
		synctest.Wait()
		store.FailAll()
		wait(10 * time.Second) // past the deadline (8.99s): the term ended
		store.Heal()
		wait(time.Minute) // nobody else leads: a free-for-all, but a may not campaign
		rec, _, err := store.Get(context.Background(), leaseName)
		mu.Lock()
		n, d := len(elected), demoted
		mu.Unlock()
		if err != nil || n != 1 || d != 0 || rec.Token != uint64(tok(1)) {
			t.Fatalf("while OnElected(1) runs: %d OnElected, %d OnDemoted, record %+v (%v)", n, d, rec, err)
		}
		if st := c.Status(); st.Leading {
			t.Fatalf("Status leads while the old term's OnElected runs: %+v", st)
		}
		if w := log.count(slog.LevelWarn, "OnElected still running", "running="); w < 5 {
			t.Fatalf("%d warnings about the wedged OnElected, want one per lease:\n%s", w, log)
		}
		close(unblock)
		wait(5 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		if demoted != 1 || len(elected) != 2 || elected[1] <= elected[0] {
			t.Fatalf("after OnElected returned: %d OnDemoted, terms %v", demoted, elected)
		}
	})
}

// A slow OnLeaderChange (it dials the new leader) does not delay OnElected.
func TestSlowLeaderChangeDoesNotDelayElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		elected := make(chan time.Time, 1)
		var mu sync.Mutex
		var seen []string
		c := newCandidate(t, tenure.Config{Store: memlease.New(), Runtime: tenure.Runtime{ID: "a"}, Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) { elected <- time.Now() },
			OnLeaderChange: func(l tenure.Leader) {
				mu.Lock()
				seen = append(seen, l.Holder)
				mu.Unlock()
				wait(30 * time.Second)
			},
		}})
		run(t, c, context.Background())
		if at := <-elected; !at.Equal(start) {
			t.Fatalf("OnElected %v after the election, behind OnLeaderChange", at.Sub(start))
		}
		wait(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 || seen[0] != "a" {
			t.Fatalf("OnLeaderChange saw %q", seen)
		}
	})
}

// A panic in a callback ends the term, releases the lease, and then goes on
// from Run with the callback's value and stack.
func TestCallbackPanicReleasesThenPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlease.New()
		c := newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a"}, Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) { panic("boom") },
			OnDemoted: func(tenure.Term, tenure.DemotionReason) { t.Error("OnDemoted after a panic") },
		}})
		recovered := make(chan any, 1)
		go func() {
			defer func() { recovered <- recover() }()
			_ = c.Run(context.Background())
		}()
		p, ok := (<-recovered).(*tenure.CallbackPanic)
		if !ok || p.Callback != "OnElected" || p.Value != "boom" || !strings.Contains(string(p.Stack), "TestCallbackPanicReleasesThenPanics") {
			t.Fatalf("Run panicked with %#v", p)
		}
		if !strings.Contains(p.Error(), "boom") || !strings.Contains(p.Error(), "TestCallbackPanicReleasesThenPanics") {
			t.Fatalf("the panic message lacks the value or the stack: %s", p.Error())
		}
		rec, _, err := store.Get(context.Background(), leaseName)
		if err != nil || !rec.Released {
			t.Fatalf("after the panic the lease is %+v (%v), want released", rec, err)
		}
	})
}

// manualClock moves only when told, and fires its timers only when told:
// time can pass without the Candidate's loop running, as across a pause.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []manualTimer
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, manualTimer{c.now.Add(d), ch})
	return ch
}

// jump moves the clock without firing any timer.
func (c *manualClock) jump(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fire fires the timers that are due.
func (c *manualClock) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			keep = append(keep, tm)
		} else {
			tm.ch <- c.now
		}
	}
	c.timers = keep
}

// A process resumed after its deadline must not read as leading: the term's
// context, contexts derived from it (through fencing.Err) and Status all say
// the term is over before the loop goroutine has run.
func TestTermEndsWithoutTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &manualClock{now: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
		ctxs := make(chan context.Context, 1)
		c := newCandidate(t, tenure.Config{Store: memlease.New(), Runtime: tenure.Runtime{ID: "a", Clock: clk}, Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) { ctxs <- ctx; <-ctx.Done() },
		}})
		stop := run(t, c, context.Background())
		ctx := <-ctxs
		derived, cancel := context.WithCancel(context.WithValue(ctx, ctxKey{}, 1))
		defer cancel()
		st := c.Status()
		if !st.Leading || ctx.Err() != nil || fencing.Err(derived) != nil {
			t.Fatalf("at the start of the term: %+v, %v, %v", st, ctx.Err(), fencing.Err(derived))
		}
		synctest.Wait()
		clk.jump(st.Deadline.Sub(clk.Now()) - 1)
		if ctx.Err() != nil || !c.Status().Leading {
			t.Fatal("the term ended before its deadline")
		}
		clk.jump(1) // at the deadline; no timer fires, the loop sleeps on
		if ctx.Err() == nil || fencing.Err(derived) == nil || c.Status().Leading {
			t.Fatalf("at the deadline: ctx %v, derived %v, status %+v", ctx.Err(), fencing.Err(derived), c.Status())
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done not closed at the deadline")
		}
		if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "deadline") {
			t.Fatalf("cause = %v", cause)
		}
		clk.fire() // the loop runs at last, and finds the term over
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// answerGate delays the answers to writes until it is opened: the write
// applies at once, the caller learns of it later.
type answerGate struct {
	lease.Store
	open chan struct{}
}

func (g *answerGate) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	v, err := g.Store.Put(ctx, name, rec, expect)
	<-g.open
	return v, err
}

// An acquiring write whose answer lands after Stop announces no term: no
// OnElected, no Status().Leading; the lease is given back.
func TestAcquireAnsweredAfterStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memlease.New()
		gate := &answerGate{Store: mem, open: make(chan struct{})}
		c := newCandidate(t, tenure.Config{Store: gate, Runtime: tenure.Runtime{ID: "a"}, Callbacks: tenure.Callbacks{
			OnElected: func(context.Context, tenure.Term) { t.Error("OnElected after shutdown") },
		}})
		stop := run(t, c, context.Background())
		synctest.Wait() // the acquiring write has applied; its answer waits
		done := make(chan error)
		go func() { done <- stop() }()
		synctest.Wait()
		close(gate.open)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if c.Status().Leading {
			t.Fatal("Status leads after Run returned")
		}
		if rec, _, err := mem.Get(context.Background(), leaseName); err != nil || !rec.Released {
			t.Fatalf("record %+v (%v), want released", rec, err)
		}
	})
}

// hangingReads never answers a read until its context is done.
type hangingReads struct {
	lease.Store
	on atomic.Bool
}

func (h *hangingReads) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if h.on.Load() {
		<-ctx.Done()
		return lease.Record{}, lease.NoVersion, ctx.Err()
	}
	return h.Store.Get(ctx, name)
}

// A follower stopped while its read is in flight returns at once: it has
// nothing to give back, and its read cannot change that.
func TestFollowerStoppedDuringReadReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memlease.New()
		run(t, newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "leader"}}), context.Background())
		synctest.Wait()
		h := &hangingReads{Store: mem}
		stop := run(t, newCandidate(t, tenure.Config{Store: h, Runtime: tenure.Runtime{ID: "follower"}}), context.Background())
		synctest.Wait()
		h.on.Store(true)
		wait(2500 * time.Millisecond) // its next poll is in flight
		start := time.Now()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("Run took %v to return", d)
		}
	})
}

// A release that cannot be confirmed says so and why.
func TestReleaseTimeoutNamesCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewFaults(memlease.New())
		stop := run(t, newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a"}}), context.Background())
		synctest.Wait()
		store.FailAll()
		err := stop()
		if !errors.Is(err, tenure.ErrReleaseUnconfirmed) || !errors.Is(err, leasetest.ErrInjected) || !strings.Contains(err.Error(), leaseName) {
			t.Fatalf("Run = %v", err)
		}
	})
}

type ctxKey struct{}

// OnElected's context carries the values of Run's.
func TestElectedContextCarriesRunValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan any, 1)
		c := newCandidate(t, tenure.Config{Store: memlease.New(), Runtime: tenure.Runtime{ID: "a"}, Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, _ tenure.Term) { got <- ctx.Value(ctxKey{}) },
		}})
		run(t, c, context.WithValue(context.Background(), ctxKey{}, "request-id"))
		if v := <-got; v != "request-id" {
			t.Fatalf("value = %v", v)
		}
	})
}

// Bad timings are refused naming the field the user set, and no sum of
// them can overflow.
func TestConfigNamesTheFieldSet(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*tenure.Config)
	}{
		{"LeaseDuration", func(c *tenure.Config) { c.LeaseDuration = -time.Second }},
		{"LeaseDuration", func(c *tenure.Config) { c.LeaseDuration = math.MaxInt64 }},
		{"OpTimeout", func(c *tenure.Config) { c.OpTimeout = 1 << 62 }},
		{"OpTimeout", func(c *tenure.Config) { c.OpTimeout = math.MaxInt64 }},
		{"RetryMax", func(c *tenure.Config) { c.RetryMax = math.MaxInt64 }},
		{"PollInterval", func(c *tenure.Config) { c.PollInterval = math.MaxInt64 }},
		{"ReleaseTimeout", func(c *tenure.Config) { c.ReleaseTimeout = math.MaxInt64 }},
		{"ReleaseTimeout", func(c *tenure.Config) { c.ReleaseTimeout = -1 }},
	} {
		cfg := tenure.Config{Lease: leaseName, Store: memlease.New()}
		tc.edit(&cfg)
		var fe *election.FieldError
		if _, err := tenure.New(cfg); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: New = %v, want an error naming it", tc.field, err)
		}
	}
}

// A permanent store error after the start, once the store has answered
// every kind of call (a read, a create, a renewal), is logged at error
// level, kept in Status().Err and retried; it is logged again while it
// lasts.
func TestPermanentErrorLaterIsSurfaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewFaults(memlease.New())
		log := &logs{}
		c := newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a", Logger: slog.New(log)}})
		run(t, c, context.Background())
		wait(election.DefaultLeaseDuration) // elected, and renewed
		denied := lease.Permanent(errors.New("AccessDeniedException: not authorized"))
		store.SetHook(func(string, string) error { return denied })
		wait(3 * time.Minute)
		if st := c.Status(); !errors.Is(st.Err, lease.ErrPermanent) {
			t.Fatalf("Status = %+v", st)
		}
		if n := log.count(slog.LevelError, "store error", "AccessDenied"); n < 3 {
			t.Fatalf("%d error logs over 3 minutes, want one a minute:\n%s", n, log)
		}
		gets, _ := store.Counts()
		store.SetHook(nil)
		wait(time.Minute)
		if g, _ := store.Counts(); g <= gets {
			t.Fatal("no retry after the error")
		}
		if st := c.Status(); st.Err != nil || !st.Leading && st.Leader.Holder == "" {
			t.Fatalf("after the error cleared: %+v", st)
		}
	})
}

// A store that answers reads and fails every write (writes throttled, a
// permission missing) sees the writes back off to RetryMax, not repeat at
// RetryMin: the read that follows each failed write answers for the read,
// not for the write.
func TestFailingWritesBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := leasetest.NewFaults(memlease.New())
		c := newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a"}})
		run(t, c, context.Background())
		wait(election.DefaultLeaseDuration)
		throttled := errors.New("ThrottlingException: rate of requests exceeds the allowed throughput")
		store.SetHook(func(op, _ string) error {
			if op == "put" {
				return throttled
			}
			return nil
		})
		_, before := store.Counts()
		wait(time.Minute)
		// Defaults: RetryMax is a tenth of the 10s lease, each wait drawn
		// from its upper half; RetryMin is a hundredth.
		if _, puts := store.Counts(); puts-before > 2*60 {
			t.Fatalf("%d writes in a minute of failing writes; want at most one per RetryMax/2 (120)", puts-before)
		}
	})
}

// noUpdates is a store that lets a lease be created and refuses every
// write over a version: a Kubernetes Role with create and without update.
type noUpdates struct{ lease.Store }

func (s noUpdates) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if expect != lease.NoVersion {
		return lease.NoVersion, lease.Permanent(errors.New(`leases "job" is forbidden: cannot update resource "leases"`))
	}
	return s.Store.Put(ctx, name, rec, expect)
}

// A store that lets a candidate take its lease and refuses it the first
// renewal has never once answered a write over a version: Run returns the
// refusal then, as at the start, rather than retrying forever.
func TestPermanentFirstRenewalEndsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		elected := false
		c := newCandidate(t, tenure.Config{Store: noUpdates{memlease.New()}, Runtime: tenure.Runtime{ID: "a"},
			Callbacks: tenure.Callbacks{OnElected: func(ctx context.Context, _ tenure.Term) { elected = true; <-ctx.Done() }}})
		done := make(chan error, 1)
		go func() { done <- c.Run(context.Background()) }()
		wait(election.DefaultLeaseDuration)
		select {
		case err := <-done:
			if !elected || !errors.Is(err, lease.ErrPermanent) || !strings.Contains(err.Error(), "cannot update") {
				t.Fatalf("elected %v, Run = %v; want elected, then the refusal of the renewal", elected, err)
			}
		default:
			t.Fatal("Run still running a lease after its renewals were refused for good")
		}
	})
}

// Two processes with the same ID: the one that sees the other's writes says
// so, at error level and in Status().Err.
func TestDuplicateIDReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memlease.New()
		run(t, newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "twin"}}), context.Background())
		synctest.Wait()
		log := &logs{}
		c := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "twin", Logger: slog.New(log), Rand: rand.New(rand.NewPCG(7, 7))}})
		run(t, c, context.Background())
		wait(30 * time.Second)
		var dup *election.DuplicateIDError
		if !errors.As(c.Status().Err, &dup) || dup.ID != "twin" {
			t.Fatalf("Status().Err = %v", c.Status().Err)
		}
		// Logged once as a store error and once as an anomaly in 30s of
		// polls, not at every poll.
		if n := log.count(slog.LevelError, "twin"); n == 0 || n > 2 {
			t.Fatalf("%d errors logged in 30s, want the duplicate said once:\n%s", n, log)
		}
	})
}

// swappable can lose its records, as a table whose item was deleted.
type swappable struct {
	mu sync.Mutex
	s  lease.Store
}

func (w *swappable) store() lease.Store { w.mu.Lock(); defer w.mu.Unlock(); return w.s }
func (w *swappable) lose()              { w.mu.Lock(); w.s = memlease.New(); w.mu.Unlock() }
func (w *swappable) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return w.store().Get(ctx, name)
}
func (w *swappable) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	return w.store().Put(ctx, name, rec, expect)
}

// A lost record: the leader steps down at its next renewal, both say what
// they saw at error level, and nobody creates it again for a lease.
func TestLostRecordLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &swappable{s: memlease.New()}
		reasons := make(chan tenure.DemotionReason, 1)
		log := &logs{}
		var mu sync.Mutex
		var terms []fencing.Token
		cb := tenure.Callbacks{
			OnElected: func(_ context.Context, term tenure.Term) { mu.Lock(); terms = append(terms, term.Token); mu.Unlock() },
			OnDemoted: func(_ tenure.Term, r tenure.DemotionReason) {
				select {
				case reasons <- r:
				default:
				}
			},
		}
		run(t, newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "a", Logger: slog.New(log)}, Callbacks: cb}), context.Background())
		synctest.Wait()
		run(t, newCandidate(t, tenure.Config{Store: store, Runtime: tenure.Runtime{ID: "b", Logger: slog.New(log)}, Callbacks: cb}), context.Background())
		wait(3 * time.Second)
		store.lose()
		lost := time.Now()
		if r := <-reasons; r != tenure.ReasonRecordLost {
			t.Fatalf("leader demoted: %v", r)
		}
		if d := time.Since(lost); d > 2*time.Second {
			t.Fatalf("leader demoted %v after the loss, later than its next renewal", d)
		}
		wait(election.WaitBeforeTakeover(10*time.Second, 1e-3) - time.Since(lost) - time.Millisecond)
		mu.Lock()
		if len(terms) != 1 {
			t.Fatalf("terms %v: the record was created again within a lease of its loss", terms)
		}
		mu.Unlock()
		wait(5 * time.Second)
		mu.Lock()
		defer mu.Unlock()
		if len(terms) != 2 || terms[1] <= terms[0] {
			t.Fatalf("terms %v", terms)
		}
		if log.count(slog.LevelError, "lease anomaly", "absent after token") < 1 {
			t.Fatalf("the loss is not logged as an error:\n%s", log)
		}
	})
}

// Resign ends the term, gives the lease back once the callbacks returned,
// another candidate takes over within a poll, and the resigned one stays a
// follower; a candidate that does not lead returns from Resign at once.
func TestResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memlease.New()
		reasons := make(chan tenure.DemotionReason, 4)
		elected := make(chan string, 4)
		cb := func(id string) tenure.Callbacks {
			return tenure.Callbacks{
				OnElected: func(ctx context.Context, _ tenure.Term) { elected <- id; <-ctx.Done(); wait(time.Second) },
				OnDemoted: func(_ tenure.Term, r tenure.DemotionReason) { reasons <- r },
			}
		}
		a := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "a"}, Callbacks: cb("a")})
		run(t, a, context.Background())
		if id := <-elected; id != "a" {
			t.Fatalf("first leader %s", id)
		}
		b := newCandidate(t, tenure.Config{Store: mem, Runtime: tenure.Runtime{ID: "b"}, Callbacks: cb("b")})
		run(t, b, context.Background())
		wait(3 * time.Second)
		start := time.Now()
		if err := a.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second { // OnElected took 1s to return
			t.Fatalf("Resign returned after %v", took)
		}
		if r := <-reasons; r != tenure.ReasonResigned {
			t.Fatalf("reason %v", r)
		}
		if rec, _, _ := mem.Get(context.Background(), leaseName); !rec.Released {
			t.Fatalf("not released after Resign: %+v", rec)
		}
		if id := <-elected; id != "b" || time.Since(start) > 3*time.Second {
			t.Fatalf("%s took over %v after the resignation", id, time.Since(start))
		}
		wait(time.Minute)
		if st := a.Status(); st.Leading || st.Leader.Holder != "b" {
			t.Fatalf("after the hold-off: %+v", st)
		}
		start = time.Now()
		if err := a.Resign(context.Background()); err != nil || time.Since(start) != 0 {
			t.Fatalf("Resign of a follower: %v after %v", err, time.Since(start))
		}
	})
}

// Resign after Run returned says so: nothing was handed over.
func TestResignAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newCandidate(t, tenure.Config{Store: memlease.New(), Runtime: tenure.Runtime{ID: "a"}})
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		synctest.Wait()
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := a.Resign(context.Background()); !errors.Is(err, tenure.ErrRunEnded) {
			t.Fatalf("Resign after Run returned: %v, want ErrRunEnded", err)
		}
	})
}
