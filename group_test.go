package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

// shardBook follows every member's terms of a group's shards and fails the
// test when two members believe they hold a shard at once (from
// OnAssigned until its context ends) or a shard's token goes back.
type shardBook struct {
	t       *testing.T
	mu      sync.Mutex
	holder  map[int]string        // shard: the member whose term is under way
	token   map[int]fencing.Token // shard: the last token
	held    map[string]int        // member: shards held
	moves   int                   // terms begun
	revoked map[tenure.DemotionReason]int
	changed chan struct{} // a term began or ended
	// linger: OnAssigned blocks until its context ends, and then this
	// long (its work winding down); the shard must stay unowned until it
	// returned.
	linger time.Duration
	// poll: OnAssigned polls its context's Err until the term ends.
	poll bool
}

func newShardBook(t *testing.T) *shardBook {
	return &shardBook{t: t, holder: map[int]string{}, token: map[int]fencing.Token{}, held: map[string]int{}, revoked: map[tenure.DemotionReason]int{}, changed: make(chan struct{}, 1)}
}

// tell says that a term began or ended; b.mu is held.
func (b *shardBook) tell() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// await waits for the terms' events until cond holds, for at most within.
func (b *shardBook) await(within time.Duration, what string, cond func() bool) {
	b.t.Helper()
	timeout := time.After(within)
	for !cond() {
		select {
		case <-b.changed:
		case <-timeout:
			b.t.Fatalf("%s: not within %v; held %v", what, within, b.held)
		}
	}
}

func (b *shardBook) member(id string) (func(context.Context, tenure.Shard), func(tenure.Shard, tenure.DemotionReason)) {
	assigned := func(ctx context.Context, s tenure.Shard) {
		b.mu.Lock()
		if h, ok := b.holder[s.ID]; ok {
			b.t.Errorf("shard %d: %s assigned (token %d) while %s holds it", s.ID, id, s.Token, h)
		}
		if s.Token <= b.token[s.ID] {
			b.t.Errorf("shard %d: token %d after %d", s.ID, s.Token, b.token[s.ID])
		}
		if f, ok := fencing.FromContext(ctx); !ok || f != s.Fence() {
			b.t.Errorf("shard %d: the context's fence %v, want %v", s.ID, f, s.Fence())
		}
		b.holder[s.ID], b.token[s.ID] = id, s.Token
		b.held[id]++
		b.moves++
		b.tell()
		b.mu.Unlock()
		for b.poll && ctx.Err() == nil {
			wait(10 * time.Millisecond) // ends the context itself at the deadline
		}
		if b.linger > 0 {
			<-ctx.Done()
			wait(b.linger)
		}
	}
	// OnRevoked comes once the term's context ended, and before the
	// release that lets another member take the shard.
	revoked := func(s tenure.Shard, r tenure.DemotionReason) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.holder[s.ID] == id {
			delete(b.holder, s.ID)
		}
		b.held[id]--
		b.revoked[r]++
		b.tell()
	}
	return assigned, revoked
}

func (b *shardBook) counts(ids ...string) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = b.held[id]
	}
	return out
}

func (b *shardBook) owned() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.holder)
}

// termsBegun returns the terms begun so far (moves).
func (b *shardBook) termsBegun() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.moves
}

type member struct {
	g    *tenure.Group
	stop context.CancelFunc
	done chan error
}

func startMember(t *testing.T, b *shardBook, store lease.Store, id string, shards int) *member {
	t.Helper()
	return startMemberWith(t, b, store, id, tenure.GroupConfig{Shards: shards})
}

// startMemberWith starts member id with cfg's Shards and options.
func startMemberWith(t *testing.T, b *shardBook, store lease.Store, id string, cfg tenure.GroupConfig) *member {
	t.Helper()
	assigned, revoked := b.member(id)
	cfg.Store, cfg.Name, cfg.ID, cfg.OnAssigned, cfg.OnRevoked, cfg.WakeAddr, cfg.Logger = store, "ingest", id, assigned, revoked, tenure.NoWake, testLogger(t)
	g, err := tenure.NewGroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &member{g: g, stop: stop, done: make(chan error, 1)}
	go func() { m.done <- g.Run(ctx) }()
	t.Cleanup(func() { stop(); <-m.done })
	return m
}

// leave stops m and waits for Run to return.
func (m *member) leave(t *testing.T) {
	t.Helper()
	m.stop()
	if err := <-m.done; err != nil {
		t.Fatal(err)
	}
	m.done <- nil // for Cleanup
}

func balanced(counts []int, k int) bool {
	n := len(counts)
	for _, c := range counts {
		if c != k/n && c != (k+n-1)/n {
			return false
		}
	}
	return true
}

// A group spreads its shards over its members, ⌊K/N⌋ or ⌈K/N⌉ each, as
// members join and leave; a shard is never held by two at once and its
// tokens only rise; a member that leaves hands every shard over before
// Run returns.
func TestGroupBalances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 12
		store := memlease.New()
		book := newShardBook(t)
		book.linger = 3 * time.Second // longer than a poll
		a := startMember(t, book, store, "a", k)
		wait(5 * time.Second)
		if got := book.counts("a"); got[0] != k {
			t.Fatalf("a alone holds %d of %d shards", got[0], k)
		}
		b := startMember(t, book, store, "b", k)
		c := startMember(t, book, store, "c", k)
		// Joins are seen within a beat; each shard moves within a poll.
		wait(10 * time.Second)
		if got := book.counts("a", "b", "c"); !balanced(got, k) || book.owned() != k {
			t.Fatalf("after b and c joined: %v held, %d of %d owned", got, book.owned(), k)
		}
		for _, m := range []*member{a, b, c} {
			if st := m.g.Status(); !st.Balanced || len(st.Members) != 3 || st.Share != 4 {
				t.Fatalf("%s: status %+v", st.ID, st)
			}
		}
		// Members by ID: each knows its own, and b and c took shards
		// from a, whose records named it.
		for _, c := range []struct {
			m     *member
			knows []string
		}{{a, []string{"a"}}, {b, []string{"a", "b"}}, {c, []string{"a", "c"}}} {
			st := c.m.g.Status()
			ids := map[string]bool{}
			for _, gm := range st.Members {
				ids[gm.ID] = true
			}
			for _, id := range c.knows {
				if !ids[id] {
					t.Errorf("%s: status lists members %+v, not %s by ID", st.ID, st.Members, id)
				}
			}
		}
		moves := book.moves
		b.leave(t)
		if got := book.counts("b"); got[0] != 0 {
			t.Fatalf("b still holds %d shards after Run returned", got[0])
		}
		wait(10 * time.Second)
		if got := book.counts("a", "c"); !balanced(got, k) || book.owned() != k {
			t.Fatalf("after b left: %v held, %d of %d owned", got, book.owned(), k)
		}
		if moved := book.moves - moves; moved > 6 {
			t.Fatalf("b's leave moved %d shards; it held 4", moved)
		}
		if book.revoked[tenure.ReasonShutDown] != 4 || book.revoked[tenure.ReasonHandedOver] < 8 {
			t.Fatalf("revocations by reason: %v", book.revoked)
		}
	})
}

// cutStore fails every call while cut is set: a member cut off from the
// store.
type cutStore struct {
	lease.Store
	cut atomic.Bool
}

var errCut = errors.New("cut off")

func (s *cutStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.cut.Load() {
		return lease.Record{}, "", errCut
	}
	return s.Store.Get(ctx, name)
}

func (s *cutStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if s.cut.Load() {
		return "", errCut
	}
	return s.Store.Put(ctx, name, rec, expect)
}

// A member cut off from the store gives its shards up by their deadlines;
// the others take them over once the takeover rule allows, within the
// bound docs/groups.md states, and none is held by two at once.
func TestGroupTakesOverFromACutMember(t *testing.T) {
	t.Run("suspected", func(t *testing.T) { testCutMember(t, false) })
	t.Run("watched", func(t *testing.T) { testCutMember(t, true) })
	// OnAssigned polls ctx.Err, which ends the context at the deadline on
	// its own goroutine, before the loop revokes: OnRevoked still gets the
	// reason.
	t.Run("polled", func(t *testing.T) { testCutMember(t, false, func(b *shardBook) { b.poll = true }) })
}

// testCutMember: with watch (GroupConfig.Watch), within the lock's
// failover bound.
func testCutMember(t *testing.T, watch bool, opts ...func(*shardBook)) {
	synctest.Test(t, func(t *testing.T) {
		const k = 12
		store := memlease.New()
		book := newShardBook(t)
		for _, o := range opts {
			o(book)
		}
		cfg := tenure.GroupConfig{Shards: k, Watch: watch}
		startMemberWith(t, book, store, "a", cfg)
		startMemberWith(t, book, store, "b", cfg)
		cut := &cutStore{Store: store}
		startMemberWith(t, book, cut, "c", cfg)
		wait(15 * time.Second)
		if got := book.counts("a", "b", "c"); !balanced(got, k) {
			t.Fatalf("before the cut: %v", got)
		}
		cut.cut.Store(true)
		start := time.Now()
		book.await(time.Minute, "a and b hold every shard after c was cut off", func() bool {
			return book.owned() == k && book.counts("c")[0] == 0
		})
		// Suspected within 3 beats of the cut, then ttl·(1+ρ) from the
		// first read of each shard, and a poll; watched, the lock's bound.
		took := time.Since(start)
		b := groupcore.NewBounds(election.Timing{}, k, 3, 0)
		bound := b.CrashTakeover
		if watch {
			bound = b.WatchedCrashTakeover
		}
		t.Logf("c's shards taken over %v after the cut; the bound is %v", took, bound)
		if took > bound {
			t.Fatalf("c's shards taken over %v after the cut", took)
		}
		if got := book.counts("c"); got[0] != 0 {
			t.Fatalf("c still believes it holds %d shards", got[0])
		}
		if book.revoked[tenure.ReasonStoreUnavailable] != 4 {
			t.Fatalf("revocations by reason: %v", book.revoked)
		}
		wait(b.Balance + time.Duration(float64(b.Timing.LeaseDuration)*(1+b.Timing.MaxDrift))) // c's entry dropped, the group rebalanced
		if got := book.counts("a", "b"); !balanced(got, k) {
			t.Fatalf("after c's entry was dropped: %v", got)
		}
	})
}

// The store refusing the group's records for good ends Run at once with
// the error.
func TestGroupPermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &refusingStore{err: fmt.Errorf("%w: no such table", lease.ErrPermanent)}
		g, err := tenure.NewGroup(tenure.GroupConfig{Store: store, Name: "ingest", Shards: 4, Runtime: tenure.Runtime{ID: "a", WakeAddr: tenure.NoWake},
			OnAssigned: func(context.Context, tenure.Shard) {}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = g.Run(context.Background())
		if !errors.Is(err, lease.ErrPermanent) || time.Since(start) > 5*time.Second {
			t.Fatalf("Run: %v after %v", err, time.Since(start))
		}
	})
}

type refusingStore struct{ err error }

func (s *refusingStore) Get(context.Context, string) (lease.Record, lease.Version, error) {
	return lease.Record{}, "", s.err
}

func (s *refusingStore) Put(context.Context, string, lease.Record, lease.Version) (lease.Version, error) {
	return "", s.err
}

func TestGroupConfig(t *testing.T) {
	ok := tenure.GroupConfig{Store: memlease.New(), Name: "ingest", Shards: 8, OnAssigned: func(context.Context, tenure.Shard) {}}
	for _, c := range []struct {
		field string
		edit  func(*tenure.GroupConfig)
	}{
		{"Store", func(c *tenure.GroupConfig) { c.Store = nil }},
		{"OnAssigned", func(c *tenure.GroupConfig) { c.OnAssigned = nil }},
		{"Shards", func(c *tenure.GroupConfig) { c.Shards = 0 }},
		{"Shards", func(c *tenure.GroupConfig) { c.Shards = 5000 }},
		{"Weight", func(c *tenure.GroupConfig) { c.Weight = -1 }},
		{"Name", func(c *tenure.GroupConfig) { c.Name = "" }},
		{"Name", func(c *tenure.GroupConfig) { c.Name = "a::b" }},
		{"RenewInterval", func(c *tenure.GroupConfig) { c.RenewInterval = time.Hour }},
	} {
		cfg := ok
		c.edit(&cfg)
		_, err := tenure.NewGroup(cfg)
		var fe *tenure.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v", c.field, err)
		}
	}
	if _, err := tenure.NewGroup(ok); err != nil {
		t.Fatal(err)
	}
}

// testLogger logs to the test with TENURE_TEST_LOG set, and nowhere
// otherwise.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("TENURE_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// A shard handed over on a join, or on a graceful leave, is taken by its
// next owner when it is woken, not at its next poll: here a poll is 20s
// away and a beat 300ms. Real clock and UDP, on loopback.
func TestGroupWakesNextOwner(t *testing.T) {
	const k = 8
	store := memlease.New()
	var mu sync.Mutex
	released := map[int]time.Time{}
	var gaps []time.Duration
	changed := make(chan struct{}, 1) // a term began or ended
	tell := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	start := func(id string) (*tenure.Group, context.CancelFunc, chan error) {
		g, err := tenure.NewGroup(tenure.GroupConfig{Store: store, Name: "ingest", Shards: k, Runtime: tenure.Runtime{ID: id, WakeAddr: "127.0.0.1:0", Logger: testLogger(t)},
			Timing: tenure.Timing{LeaseDuration: 30 * time.Second, RenewInterval: 300 * time.Millisecond, PollInterval: 20 * time.Second, OpTimeout: 300 * time.Millisecond},

			OnAssigned: func(ctx context.Context, s tenure.Shard) {
				mu.Lock()
				defer mu.Unlock()
				defer tell()
				if at, ok := released[s.ID]; ok {
					gaps = append(gaps, time.Since(at))
					delete(released, s.ID)
				}
			},
			OnRevoked: func(s tenure.Shard, _ tenure.DemotionReason) {
				mu.Lock()
				defer mu.Unlock()
				defer tell()
				released[s.ID] = time.Now()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		stop, done := runGroup(t, g)
		return g, stop, done
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(10 * time.Second) // well below a poll
		for !cond() {
			select {
			case <-changed:
			case <-timeout:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: not within 10s (a poll is 20s); not yet taken: %v", what, released)
			}
		}
	}
	heldBy := func(gs ...*tenure.Group) []int {
		var out []int
		for _, g := range gs {
			out = append(out, len(g.Status().Held))
		}
		return out
	}
	a, _, _ := start("a")
	waitFor("a takes every shard", func() bool { return len(a.Status().Held) == k })
	b, stopB, doneB := start("b")
	taken := func(n int) bool { // n shards taken after a release
		mu.Lock()
		defer mu.Unlock()
		return len(gaps) >= n
	}
	waitFor("b's join balances the group", func() bool { h := heldBy(a, b); return h[0] == k/2 && h[1] == k/2 && taken(k/2) })
	mu.Lock()
	joined := len(gaps)
	mu.Unlock()
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	doneB <- nil
	waitFor("b's leave hands its shards to a", func() bool { return len(a.Status().Held) == k && taken(k) })
	mu.Lock()
	defer mu.Unlock()
	if joined != k/2 || len(gaps) != k {
		t.Fatalf("%d shards taken after a release on the join, %d in all; want %d and %d", joined, len(gaps), k/2, k)
	}
	for _, gap := range gaps {
		if gap > 5*time.Second {
			t.Fatalf("a shard unowned for %v between its release and its next owner's term: not woken", gap)
		}
	}
	t.Logf("unowned between release and the next term: %v", gaps)
}

// runGroup runs g until stop is called or the test ends; done carries
// Run's result once.
func runGroup(t *testing.T, g *tenure.Group) (stop context.CancelFunc, done chan error) {
	ctx, stop := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return stop, done
}

// An advertised address the membership record cannot carry fails Run at
// once, and closes the listener it opened.
func TestGroupBadAdvertise(t *testing.T) {
	g, err := tenure.NewGroup(tenure.GroupConfig{Store: memlease.New(), Name: "ingest", Shards: 4,
		OnAssigned: func(context.Context, tenure.Shard) {}, Runtime: tenure.Runtime{WakeAddr: "127.0.0.1:0", WakeAdvertise: "my host:7000"}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "my host:7000") {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

// Junk in the membership record (a payload no member wrote) neither stops
// the group nor freezes it: the shards held keep their terms, the record is
// rewritten once it stayed junk for a lease, and then a member cut off has
// its shards taken over as before.
func TestGroupSurvivesJunkMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 12
		store := memlease.New()
		book := newShardBook(t)
		cfg := tenure.GroupConfig{Shards: k}
		members := []*member{startMemberWith(t, book, store, "a", cfg), startMemberWith(t, book, store, "b", cfg)}
		cut := &cutStore{Store: store}
		members = append(members, startMemberWith(t, book, cut, "c", cfg))
		wait(15 * time.Second)
		if got := book.counts("a", "b", "c"); !balanced(got, k) {
			t.Fatalf("before the junk: %v", got)
		}
		ctx := context.Background()
		rec, ver, err := store.Get(ctx, "ingest::members")
		if err != nil {
			t.Fatal(err)
		}
		rec.Payload, rec.Nonce = []byte("not a membership record\n"), "junk"
		if _, err := store.Put(ctx, "ingest::members", rec, ver); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		moves := book.termsBegun()
		wait(20 * time.Second) // a lease unreadable, then rewritten
		if n := book.termsBegun() - moves; n != 0 || book.owned() != k {
			t.Fatalf("the junk moved %d shards; %d of %d owned", n, book.owned(), k)
		}
		for _, m := range members {
			select {
			case err := <-m.done:
				t.Fatalf("a member's Run returned over junk: %v", err)
			default:
			}
		}
		rec, _, err = store.Get(ctx, "ingest::members")
		if err != nil {
			t.Fatal(err)
		}
		if es, err := groupcore.Decode(rec.Payload); err != nil || len(es) != 3 {
			t.Fatalf("the record after a lease of junk: %q (%v), want the 3 members", rec.Payload, err)
		}
		cut.cut.Store(true) // c is cut off: a and b take its shards over
		book.await(time.Minute, "a and b hold every shard after c was cut off", func() bool {
			return book.owned() == k && book.counts("c")[0] == 0
		})
	})
}

// Ghosts in the membership record (entries no member wrote: 40 of them in
// place of the members', or one of weight 9999 beside them) move no shard
// held: a held shard goes only to a member seen to beat, and a member
// whose entry is gone while its own beats work still counts itself in.
// The ghosts never beat, so they die out of the record within a lease or
// two, and the members are back in it.
func TestGroupSurvivesGhostMembers(t *testing.T) {
	ghost := func(i int) groupcore.Entry {
		return groupcore.Entry{Key: groupcore.Key(fmt.Sprint("ghost-", i)), Seq: 7, Weight: 1}
	}
	for _, c := range []struct {
		name  string
		forge func(real []groupcore.Entry) []groupcore.Entry
	}{
		{"40 ghosts", func([]groupcore.Entry) []groupcore.Entry {
			var es []groupcore.Entry
			for i := range groupcore.MaxMembers {
				es = append(es, ghost(i))
			}
			return es
		}},
		{"weight 9999", func(real []groupcore.Entry) []groupcore.Entry {
			g := ghost(0)
			g.Weight = groupcore.MaxWeight
			return append(real, g)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const k = 12
				store := memlease.New()
				book := newShardBook(t)
				cfg := tenure.GroupConfig{Shards: k}
				for _, id := range []string{"a", "b", "c"} {
					startMemberWith(t, book, store, id, cfg)
				}
				wait(15 * time.Second)
				if got := book.counts("a", "b", "c"); !balanced(got, k) {
					t.Fatalf("before the ghosts: %v", got)
				}
				ctx := context.Background()
				rec, ver, err := store.Get(ctx, "ingest::members")
				if err != nil {
					t.Fatal(err)
				}
				real, err := groupcore.Decode(rec.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Payload, err = groupcore.Encode(c.forge(real)); err != nil {
					t.Fatal(err)
				}
				rec.Holder, rec.Nonce = "forger", "ghosts"
				if _, err := store.Put(ctx, "ingest::members", rec, ver); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				moves := book.termsBegun()
				wait(40 * time.Second)
				if n := book.termsBegun() - moves; n != 0 || book.owned() != k {
					t.Fatalf("the ghosts moved %d shards; %d of %d owned", n, book.owned(), k)
				}
				rec, _, err = store.Get(ctx, "ingest::members")
				if err != nil {
					t.Fatal(err)
				}
				if es, err := groupcore.Decode(rec.Payload); err != nil || len(es) != 3 {
					t.Fatalf("the record after the ghosts died out: %q (%v), want the 3 members", rec.Payload, err)
				}
			})
		})
	}
}
