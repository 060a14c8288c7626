package tenure_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// outage fails every write while down is set: a store that answers reads
// and refuses to take writes, as in a brownout.
type outage struct {
	lease.Store
	down atomic.Bool
}

func (o *outage) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if o.down.Load() {
		return "", errors.New("store unavailable")
	}
	return o.Store.Put(ctx, name, rec, expect)
}

// runLeader runs candidate "a" of lease "x" with cfg, whose OnElected
// passes its term's context on terms and waits for its end; cancel ends
// the run, whose result comes on done.
func runLeader(t *testing.T, cfg tenure.Config) (c *tenure.Candidate, terms chan context.Context, cancel context.CancelFunc, done chan error) {
	t.Helper()
	terms = make(chan context.Context, 2)
	cfg.Lease, cfg.ID = "x", "a"
	cfg.Callbacks.OnElected = func(ctx context.Context, _ tenure.Term) { terms <- ctx; <-ctx.Done() }
	c, err := tenure.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, terms, cancel, done
}

// awaitJeopardy waits on the term's context until it is in jeopardy (in)
// or out of it, and returns what JeopardyOf says then.
func awaitJeopardy(t *testing.T, ctx context.Context, in bool) tenure.Jeopardy {
	t.Helper()
	for {
		j, now, changed := tenure.JeopardyOf(ctx)
		if now == in {
			return j
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the term ended before it was in jeopardy: %v (want %v)", context.Cause(ctx), in)
		}
	}
}

// TestLeaderJeopardy: while the leader's renewals fail it still leads,
// and the term's code learns it is in jeopardy (JeopardyOf, Status) from
// the first failure, well before the deadline; when a renewal lands, it
// learns the term is safe again. A term that ends for want of renewals was
// in jeopardy first.
func TestLeaderJeopardy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &outage{Store: memlease.New()}
		c, terms, cancel, done := runLeader(t, tenure.Config{Store: store})
		term := <-terms
		if _, in, _ := tenure.JeopardyOf(term); in {
			t.Fatal("in jeopardy at once")
		}
		store.down.Store(true)
		failedAt := time.Now()
		j := awaitJeopardy(t, term, true)
		st := c.Status()
		if !st.Leading || !st.Jeopardy.Equal(j.Since) || j.Since.Before(failedAt) || !j.Deadline.Equal(st.Deadline) {
			t.Fatalf("jeopardy %+v, status %+v", j, st)
		}
		if slack := time.Until(j.Deadline); slack < time.Second {
			t.Fatalf("in jeopardy only %v before the deadline", slack)
		}
		store.down.Store(false)
		awaitJeopardy(t, term, false)
		if st := c.Status(); !st.Leading || !st.Jeopardy.IsZero() {
			t.Fatalf("status after a renewal landed: %+v", st)
		}
		// For good this time: the term ends at its deadline, in jeopardy
		// until then.
		store.down.Store(true)
		j = awaitJeopardy(t, term, true)
		<-term.Done()
		if now := time.Now(); now.Before(j.Deadline) {
			t.Fatalf("term ended at %v, before the deadline %v it was told", now, j.Deadline)
		}
		cancel()
		<-done
	})
}

// TestLockJeopardy: the same for a held lock, through its Context; the
// tenure.jeopardy counter counts it while it lasts.
func TestLockJeopardy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &outage{Store: memlease.New()}
		reader := sdkmetric.NewManualReader()
		l, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "a", MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		h, err := l.Lock(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		store.down.Store(true)
		j := awaitJeopardy(t, h.Context(), true)
		if !j.Deadline.Equal(h.Deadline()) || h.Context().Err() != nil {
			t.Fatalf("jeopardy %+v; lock deadline %v, err %v", j, h.Deadline(), h.Context().Err())
		}
		if n := sum(collect(t, reader)["tenure.jeopardy"]); n != 1 {
			t.Fatalf("tenure.jeopardy %d in jeopardy, want 1", n)
		}
		store.down.Store(false)
		awaitJeopardy(t, h.Context(), false)
		if n := sum(collect(t, reader)["tenure.jeopardy"]); n != 0 {
			t.Fatalf("tenure.jeopardy %d once safe, want 0", n)
		}
		if err := h.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, in, changed := tenure.JeopardyOf(context.Background()); in || changed != nil {
			t.Fatal("JeopardyOf a context of no term")
		}
	})
}

// lateTakeover makes a takeover confirmed late, as a slow store can: its
// first write times out and lands later, after the read-back that says it
// did not apply; the retried write times out too; and the read-back that
// finds the first write is slow. The term runs from the first write's
// sending, so little of it is left; and its first renewal is slow too.
type lateTakeover struct {
	lease.Store
	puts, gets atomic.Int32
}

func (s *lateTakeover) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	switch s.puts.Add(1) {
	case 1:
		go func() {
			wait(4 * time.Second)
			_, _ = s.Store.Put(context.Background(), name, rec, expect)
		}()
		<-ctx.Done()
		return "", ctx.Err()
	case 2:
		<-ctx.Done()
		return "", ctx.Err()
	case 3: // the first renewal: answered after the deadline
		wait(time.Second)
	}
	return s.Store.Put(ctx, name, rec, expect)
}

func (s *lateTakeover) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.gets.Add(1) == 3 { // the read-back after the retry: it finds the first write
		wait(2800 * time.Millisecond)
	}
	return s.Store.Get(ctx, name)
}

// A term confirmed with less than an OpTimeout left (its takeover's answer
// lost, the read-backs slow) is in jeopardy from its start: its first
// renewal may be answered after the deadline, and nothing else would say
// so before the term ends (found by the simulator: store-brownout seed
// 1269 at 2,000 seeds).
func TestTermConfirmedLateBeginsInJeopardy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A write sent at 0 and confirmed at about 8.7s leaves about 0.3s
		// of its 8.99s, less than an OpTimeout (2.9s here).
		c, terms, cancel, done := runLeader(t, tenure.Config{Store: &lateTakeover{Store: memlease.New()}, Timing: tenure.Timing{RenewInterval: time.Second, OpTimeout: 2900 * time.Millisecond}})
		term := <-terms
		st := c.Status()
		left := time.Until(st.Deadline)
		_, in, _ := tenure.JeopardyOf(term)
		<-term.Done()
		var te *tenure.TermEndedError
		ended := errors.As(context.Cause(term), &te) && te.Reason == tenure.ReasonExpired
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !in || left >= 2900*time.Millisecond || st.Jeopardy.IsZero() || !ended {
			t.Fatalf("a term with %v left (OpTimeout 2.9s): in jeopardy %v, status %+v, ended %v; want in jeopardy from its start, then expired", left, in, st, context.Cause(term))
		}
	})
}
