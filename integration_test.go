package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/s3lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// The Candidate end to end against each real server, in real time: the SDK's
// connection goroutines cannot live in a synctest bubble. Leases are short so
// that a failover takes seconds, yet a store call may take up to a second: CI
// runs these beside CPU-heavy tests on two cores, next to a JVM. Every wait
// is bounded, and a bound that passes fails the test.
const e2eLease = 4 * time.Second

// e2eConfig: renewals and polls every 800ms, a lead window of 4s - 4ms -
// 400ms, room for a renewal to time out, be read back and be retried.
func e2eConfig(store lease.Store, id string, ev *events) tenure.Config {
	return tenure.Config{
		Lease:   "e2e/leader",
		Store:   store,
		Runtime: tenure.Runtime{ID: id},
		Timing: tenure.Timing{
			LeaseDuration: e2eLease,
			OpTimeout:     time.Second,
			RetryMax:      200 * time.Millisecond,
		},
		Callbacks: ev.callbacks(id),
	}
}

// e2eTakeover bounds a failover after a crash: (ttl(1+ρ) + poll)/(1-ρ) + four
// round trips, each up to OpTimeout.
var e2eTakeover = election.WaitBeforeTakeover(e2eLease, 2e-3) + e2eLease/5 + 4*time.Second

type electedEvent struct {
	id    string
	term  tenure.Term
	at    time.Time
	ended <-chan struct{} // the term's context
}

type demotedEvent struct {
	id     string
	term   tenure.Term
	reason tenure.DemotionReason
	at     time.Time
}

// events gathers the callbacks of all candidates of one test.
type events struct {
	elected chan electedEvent
	demoted chan demotedEvent
	seen    chan string // "c saw b": c observed b as the leader
}

func newEvents() *events {
	return &events{elected: make(chan electedEvent, 16), demoted: make(chan demotedEvent, 16), seen: make(chan string, 64)}
}

func (ev *events) callbacks(id string) tenure.Callbacks {
	return tenure.Callbacks{
		OnElected: func(ctx context.Context, term tenure.Term) {
			ev.elected <- electedEvent{id: id, term: term, at: time.Now(), ended: ctx.Done()}
		},
		OnDemoted: func(term tenure.Term, reason tenure.DemotionReason) {
			ev.demoted <- demotedEvent{id: id, term: term, reason: reason, at: time.Now()}
		},
		OnLeaderChange: func(l tenure.Leader) {
			select {
			case ev.seen <- id + " saw " + l.Holder:
			default: // nobody waits for it
			}
		},
	}
}

// waitSeen waits until want (e.g. "c saw b") is reported.
func (ev *events) waitSeen(t *testing.T, want string, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case s := <-ev.seen:
			if s == want {
				return
			}
		case <-timeout:
			t.Fatalf("%q not reported within %v", want, within)
		}
	}
}

// waitSeenAll waits until each of want is reported, in any order.
func (ev *events) waitSeenAll(t *testing.T, within time.Duration, want ...string) {
	t.Helper()
	timeout := time.After(within)
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	for len(left) > 0 {
		select {
		case s := <-ev.seen:
			delete(left, s)
		case <-timeout:
			t.Fatalf("%v not reported within %v", left, within)
		}
	}
}

func (ev *events) nextElected(t *testing.T, within time.Duration) electedEvent {
	t.Helper()
	select {
	case e := <-ev.elected:
		return e
	case <-time.After(within):
		t.Fatalf("no election within %v", within)
		return electedEvent{}
	}
}

func (ev *events) nextDemoted(t *testing.T, within time.Duration) demotedEvent {
	t.Helper()
	select {
	case e := <-ev.demoted:
		return e
	case <-time.After(within):
		t.Fatalf("no demotion within %v", within)
		return demotedEvent{}
	}
}

// running is one Candidate whose store access can fail on demand.
type running struct {
	faults *leasetest.Faults
	c      *tenure.Candidate
	cancel context.CancelFunc
	done   chan error
}

func runCandidate(t *testing.T, store lease.Store, id string, ev *events) *running {
	t.Helper()
	f := leasetest.NewFaults(store)
	c, err := tenure.New(e2eConfig(f, id, ev))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{faults: f, c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.cancel(); <-r.done })
	return r
}

func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancellation")
		return nil
	}
}

// onEveryStore runs f in parallel subtests on a fresh table of DynamoDB
// Local, a fresh bucket of each S3 server, a fresh prefix on Redis and a
// fresh bucket on NATS.
func onEveryStore(t *testing.T, prefix string, f func(*testing.T, lease.Store)) {
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		_, _, store := dynamoStore(t, prefix)
		f(t, store)
	})
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			c := srv.Client()
			store, err := s3lease.New(c, s3lease.Config{Bucket: testservers.NewBucket(t, c), Prefix: "tenure/"})
			if err != nil {
				t.Fatal(err)
			}
			f(t, store)
		})
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		store, err := storeurl.Open(t.Context(), testservers.Redis(t)+"?prefix="+testservers.UniqueName(prefix)+":")
		if err != nil {
			t.Fatal(err)
		}
		f(t, store)
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		store, err := storeurl.Open(t.Context(), testservers.NATS(t)+"/"+strings.ReplaceAll(testservers.UniqueName(prefix), ".", "_")+"?create=true")
		if err != nil {
			t.Fatal(err)
		}
		f(t, store)
	})
}

// dynamoStore makes a table of its own on DynamoDB Local and a store on it.
func dynamoStore(t testing.TB, prefix string) (*dynamodb.Client, string, lease.Store) {
	t.Helper()
	api := testservers.DynamoDB(t)
	table := testservers.UniqueName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamolease.CreateTable(ctx, api, table, dynamolease.TableOptions{}); err != nil {
		t.Fatal(err)
	}
	store, err := dynamolease.New(api, dynamolease.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return api, table, store
}

func TestIntegrationCandidate(t *testing.T) {
	onEveryStore(t, "tenure-e2e", candidateEndToEnd)
}

// candidateEndToEnd walks one lease through its life on store: first
// election, a lost renewal response, a crash and failover, a graceful handoff
// with a lost takeover response, and a store that becomes unreachable.
func candidateEndToEnd(t *testing.T, store lease.Store) {
	ev := newEvents()

	// First election: a new record's token is the wall time in Unix
	// milliseconds, so that it is above any token of a record lost before.
	before := fencing.Token(time.Now().UnixMilli())
	a := runCandidate(t, store, "a", ev)
	e := ev.nextElected(t, 5*time.Second)
	first := e.term.Token
	if e.id != "a" || first < before || first > fencing.Token(time.Now().UnixMilli()) {
		t.Fatalf("first election: %s with token %d, want a with the time in ms (%d or later)", e.id, first, before)
	}

	// A renewal applies but its answer is lost: a reads the record back,
	// finds its nonce, and keeps leading through several renewals.
	puts := make(chan struct{}, 64)
	a.faults.SetHook(func(op, _ string) error {
		if op == "put" {
			puts <- struct{}{}
		}
		return nil
	})
	a.faults.LosePutResponses(1)
	timeout := time.After(10 * time.Second)
	for range 4 {
		select {
		case <-puts:
		case <-timeout:
			t.Fatal("a stopped renewing after a lost response")
		}
	}
	a.faults.SetHook(nil)
	select {
	case d := <-ev.demoted:
		t.Fatalf("a demoted (%v) after a lost renewal response", d.reason)
	default:
	}
	if st := a.c.Status(); !st.Leading || st.Token != first {
		t.Fatalf("a after a lost renewal response: %+v", st)
	}

	// a crashes: nothing it sends arrives any more, and it never releases.
	b := runCandidate(t, store, "b", ev)
	a.faults.FailAll()
	crashed := time.Now()
	if err := a.stop(t); !errors.Is(err, leasetest.ErrInjected) {
		t.Fatalf("a's Run after the crash = %v, want the failed release", err)
	}
	if d := ev.nextDemoted(t, time.Second); d.id != "a" || d.reason != tenure.ReasonShutDown {
		t.Fatalf("crash: %s demoted (%v)", d.id, d.reason)
	}
	e = ev.nextElected(t, e2eTakeover)
	if e.id != "b" || e.term.Token != first+1 {
		t.Fatalf("failover: %s with token %d, want b with %d", e.id, e.term.Token, first+1)
	}
	t.Logf("failover after a crash: %v", e.at.Sub(crashed).Round(time.Millisecond))

	// Graceful handoff to c, whose takeover response is lost: it learns from
	// the read-back that it leads.
	c := runCandidate(t, store, "c", ev)
	c.faults.LosePutResponses(1)
	ev.waitSeen(t, "c saw b", 5*time.Second)
	released := time.Now()
	if err := b.stop(t); err != nil {
		t.Fatalf("b's release: %v", err)
	}
	if d := ev.nextDemoted(t, time.Second); d.id != "b" || d.reason != tenure.ReasonShutDown {
		t.Fatalf("handoff: %s demoted (%v)", d.id, d.reason)
	}
	e = ev.nextElected(t, e2eLease/5+4*time.Second)
	if e.id != "c" || e.term.Token != first+2 {
		t.Fatalf("handoff: %s with token %d, want c with %d", e.id, e.term.Token, first+2)
	}
	if f := e.term.Fence(); f != (fencing.Fence{Lease: "e2e/leader", Token: first + 2}) {
		t.Fatalf("fence = %+v", f)
	}
	t.Logf("handoff after a release: %v", e.at.Sub(released).Round(time.Millisecond))

	// The store becomes unreachable for c: it steps down by its deadline,
	// saying why, and its term's context ends no later than the demotion.
	c.faults.FailAll()
	cut := time.Now()
	d := ev.nextDemoted(t, e2eLease+time.Second)
	if d.id != "c" || d.reason != tenure.ReasonStoreUnavailable {
		t.Fatalf("unreachable store: %s demoted (%v)", d.id, d.reason)
	}
	if lag := d.at.Sub(cut); lag > e2eLease {
		t.Fatalf("demoted %v after the store went away, beyond the %v lease", lag, e2eLease)
	}
	select {
	case <-e.ended:
	default:
		t.Fatal("OnDemoted before the term's context ended")
	}
	if st := c.c.Status(); st.Leading || !errors.Is(st.Err, leasetest.ErrInjected) {
		t.Fatalf("c's status: %+v", st)
	}
}

// A missing table or bucket is an error that retrying cannot cure: Run
// returns it at once, naming the table or bucket and the server's error code.
func TestIntegrationPermanentErrorFailsFast(t *testing.T) {
	check := func(t *testing.T, store lease.Store, want ...string) {
		t.Helper()
		c, err := tenure.New(tenure.Config{Lease: "e2e/missing", Store: store, Timing: tenure.Timing{LeaseDuration: e2eLease, OpTimeout: time.Second, RetryMax: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(context.Background()) }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run kept retrying a permanent error")
		}
		if !errors.Is(err, lease.ErrPermanent) {
			t.Fatalf("Run = %v, want a permanent error", err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Run = %v, want it to name %q", err, w)
			}
		}
	}
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		table := testservers.UniqueName("tenure-missing")
		store, err := dynamolease.New(testservers.DynamoDB(t), dynamolease.Config{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		check(t, store, table, "ResourceNotFoundException")
	})
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			bucket := testservers.UniqueName("tenure-missing")
			store, err := s3lease.New(srv.Client(), s3lease.Config{Bucket: bucket})
			if err != nil {
				t.Fatal(err)
			}
			check(t, store, bucket, "NoSuchBucket")
		})
	}
}

// The record vanishes under a live leader (an operator's delete, a TTL or
// lifecycle rule): the leader steps down at its next renewal with
// ReasonRecordLost, and the follower, which had seen the record, creates it
// again only after waiting out a whole lease, with a token above the lost
// one.
func TestIntegrationRecordLost(t *testing.T) {
	t.Run("dynamodb-local", func(t *testing.T) {
		t.Parallel()
		api, table, store := dynamoStore(t, "tenure-lost")
		recordLost(t, store, func(ctx context.Context, name string) error {
			_, err := api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName: &table,
				Key:       map[string]dbtypes.AttributeValue{"lease": &dbtypes.AttributeValueMemberS{Value: name}},
			})
			return err
		})
	})
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			c := srv.Client()
			bucket := testservers.NewBucket(t, c)
			store, err := s3lease.New(c, s3lease.Config{Bucket: bucket, Prefix: "tenure/"})
			if err != nil {
				t.Fatal(err)
			}
			recordLost(t, store, func(ctx context.Context, name string) error {
				_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(store.Key(name))})
				return err
			})
		})
	}
}

func recordLost(t *testing.T, store lease.Store, del func(ctx context.Context, name string) error) {
	ev := newEvents()
	runCandidate(t, store, "a", ev)
	e := ev.nextElected(t, 5*time.Second)
	if e.id != "a" {
		t.Fatalf("first election: %s", e.id)
	}
	runCandidate(t, store, "b", ev)
	ev.waitSeen(t, "b saw a", 5*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deleted := time.Now()
	if err := del(ctx, "e2e/leader"); err != nil {
		t.Fatal(err)
	}
	d := ev.nextDemoted(t, e2eLease)
	if d.id != "a" || d.reason != tenure.ReasonRecordLost {
		t.Fatalf("after the delete: %s demoted (%v), want a (%v)", d.id, d.reason, tenure.ReasonRecordLost)
	}
	next := ev.nextElected(t, e2eTakeover+e2eLease)
	// Whoever takes it had seen the record: it waited a whole lease after
	// its first read that found it gone, which came after the delete.
	if wait := next.at.Sub(deleted); wait < election.WaitBeforeTakeover(e2eLease, election.DefaultMaxDrift) {
		t.Fatalf("%s created the lost record again %v after the delete, before a lease had passed", next.id, wait.Round(time.Millisecond))
	}
	if next.term.Token <= e.term.Token {
		t.Fatalf("token %d after the loss, not above the lost %d", next.term.Token, e.term.Token)
	}
	t.Logf("%s leads again %v after the delete, token %d after %d", next.id, next.at.Sub(deleted).Round(time.Millisecond), next.term.Token, e.term.Token)
}

// Locks on each real server: refused while held, taken with the next token
// once given back, and released for good by Close.
func TestIntegrationLocker(t *testing.T) {
	check := func(t *testing.T, store lease.Store) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		a, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "a"}, Timing: tenure.Timing{LeaseDuration: e2eLease, OpTimeout: time.Second, RetryMax: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: "b"}, Timing: tenure.Timing{LeaseDuration: e2eLease, OpTimeout: time.Second, RetryMax: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		h, err := a.TryLock(ctx, "e2e/lock")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryLock(ctx, "e2e/lock"); !errors.Is(err, tenure.ErrLocked) {
			t.Fatalf("TryLock while held: %v", err)
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		h2, err := b.TryLock(ctx, "e2e/lock")
		// The next token; on a store that may lose writes, at least the
		// wall time in ms, which is later than h's.
		if err != nil || h2.Token() != h.Token()+1 && !(lease.IsLossy(store) && h2.Token() > h.Token()) {
			t.Fatalf("after Unlock: %v (token %v after %d)", err, h2, h.Token())
		}
		b.Close()
		if rec, _, err := store.Get(ctx, "e2e/lock"); err != nil || !rec.Released || rec.Token != uint64(h2.Token()) {
			t.Fatalf("after Close: %+v, %v", rec, err)
		}

		// Fair waiters, through the queue record on the same server.
		h3, err := a.Lock(ctx, "e2e/fair")
		if err != nil {
			t.Fatal(err)
		}
		order := make(chan string, 2)
		// The queue record, watched: each waiter starts once the one
		// before it holds a ticket.
		queued := make(chan int, 16)
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go tenure.Watch(wctx, tenure.WatchConfig{Lease: "e2e/fair::queue", Store: store, Timing: tenure.Timing{PollInterval: 100 * time.Millisecond}}, func(o tenure.Observation) {
			select {
			case queued <- len(strings.Fields(string(o.Payload))):
			default: // nobody waits any more
			}
		})
		for n, id := range []string{"w1", "w2"} {
			w, err := tenure.NewLocker(tenure.LockerConfig{Store: store, Runtime: tenure.Runtime{ID: id}, Timing: tenure.Timing{LeaseDuration: e2eLease, OpTimeout: time.Second, RetryMax: 200 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			go func() {
				h, err := w.Lock(ctx, "e2e/fair", tenure.Fair())
				if err != nil {
					t.Error(err)
					order <- "error"
					return
				}
				order <- id
				h.Unlock(ctx)
			}()
			for waiting := true; waiting; {
				select {
				case k := <-queued:
					waiting = k < n+1
				case <-ctx.Done():
					t.Fatalf("%s never took a ticket", id)
				}
			}
		}
		if err := h3.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if first, second := <-order, <-order; first != "w1" || second != "w2" {
			t.Fatalf("fair waiters granted as %s, %s", first, second)
		}
	}
	onEveryStore(t, "tenure-locks", check)
}

// Semaphores on each real server: two slots held at once, a TryLock
// refused listing both holders, another n refused, six contending callers
// never more than two at once with each slot's tokens increasing, and a
// silent holder's slot taken after its lease.
func TestIntegrationSemaphore(t *testing.T) {
	check := func(t *testing.T, store lease.Store) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		locker := func(id string, st lease.Store) *tenure.Locker {
			l, err := tenure.NewLocker(tenure.LockerConfig{Store: st, Runtime: tenure.Runtime{ID: id}, Timing: tenure.Timing{LeaseDuration: e2eLease, OpTimeout: time.Second, RetryMax: 200 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		}
		cut := leasetest.NewFaults(store) // b's link to the server
		a, b, c := locker("a", store), locker("b", cut), locker("c", store)
		ha, err := a.TryLock(ctx, "e2e/pool", tenure.Slots(2))
		if err != nil {
			t.Fatal(err)
		}
		hb, err := b.TryLock(ctx, "e2e/pool", tenure.Slots(2))
		if err != nil || hb.Slot() == ha.Slot() {
			t.Fatalf("b: %v (slot %v beside a's %d)", err, hb, ha.Slot())
		}
		var le *tenure.LockedError
		if _, err := c.TryLock(ctx, "e2e/pool", tenure.Slots(2)); !errors.As(err, &le) || len(le.Holders) != 2 ||
			le.Holders[ha.Slot()].Holder != "a" || le.Holders[hb.Slot()].Token != hb.Token() {
			t.Fatalf("TryLock with both slots held: %v", err)
		}
		if _, err := c.TryLock(ctx, "e2e/pool", tenure.Slots(3)); !errors.Is(err, tenure.ErrSlotsMismatch) {
			t.Fatalf("Slots(3) on a pool of 2: %v", err)
		}

		// b goes silent: c waits out its lease and takes its slot.
		cut.FailAll()
		silent := time.Now()
		hc, err := c.Lock(ctx, "e2e/pool", tenure.Slots(2))
		if err != nil || hc.Slot() != hb.Slot() || hc.Token() <= hb.Token() {
			t.Fatalf("c after b went silent: %v (slot %v)", err, hc)
		}
		if took := time.Since(silent); took < e2eLease || took > e2eTakeover {
			t.Errorf("b's slot taken %v after it went silent; want between %v and %v", took, e2eLease, e2eTakeover)
		}
		if hb.Context().Err() == nil {
			t.Error("b still believes it holds its slot")
		}
		for _, h := range []*tenure.Lock{ha, hc} {
			if err := h.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// Six callers, two slots, three rounds each.
		var mu sync.Mutex
		holding, most := 0, 0
		last := map[int]fencing.Token{}
		var wg sync.WaitGroup
		for i := range 6 {
			l := locker(fmt.Sprintf("w%d", i), store)
			wg.Go(func() {
				for range 3 {
					h, err := l.Lock(ctx, "e2e/pool", tenure.Slots(2))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					holding++
					most = max(most, holding)
					if h.Token() <= last[h.Slot()] {
						t.Errorf("slot %d granted with token %d after %d", h.Slot(), h.Token(), last[h.Slot()])
					}
					last[h.Slot()] = h.Token()
					mu.Unlock()
					if _, _, err := store.Get(ctx, "e2e/pool::slots"); err != nil { // the work: a round trip
						t.Error(err)
					}
					mu.Lock()
					holding--
					mu.Unlock()
					if err := h.Unlock(ctx); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if most > 2 {
			t.Errorf("%d held at once, of 2 slots", most)
		}
	}
	onEveryStore(t, "tenure-sem", check)
}

// Groups on each real server: a member alone owns every shard; a second
// that joins takes half of them, and a member that leaves hands its
// shards back before Run returns; no shard is held by two at once and
// its tokens only rise (the shard book checks both throughout).
func TestIntegrationGroup(t *testing.T) {
	onEveryStore(t, "tenure-group", func(t *testing.T, store lease.Store) {
		const k = 4
		book := newShardBook(t)
		within := 3*e2eTakeover + 10*time.Second
		startMember(t, book, store, "a", k)
		book.await(within, "a owns every shard", func() bool { return book.counts("a")[0] == k })
		b := startMember(t, book, store, "b", k)
		book.await(within, "a and b share the shards", func() bool {
			got := book.counts("a", "b")
			return balanced(got, k) && got[0]+got[1] == k
		})
		b.leave(t)
		if got := book.counts("b"); got[0] != 0 {
			t.Fatalf("b still holds %d shards after Run returned", got[0])
		}
		book.await(within, "a owns every shard again", func() bool { return book.counts("a")[0] == k })
	})
}
