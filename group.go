package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/lease"

	"github.com/tenure-go/tenure/internal/seam"
)

// GroupConfig configures a Group. Store, Name, Shards and OnAssigned are
// required; every other field has a default, which NewGroup fills in on
// its own copy.
type GroupConfig struct {
	// Store keeps the shards' leases and the membership record.
	Store lease.Store
	// Name names the group: its shards are the leases Name/0 …
	// Name/Shards-1, its membership record Name::members.
	Name string
	// Shards is the number of shards, 1 to 4096. Every member of a group
	// must give the same number.
	Shards int
	// OnAssigned starts the work of a shard this member now holds. Its
	// context ends at the shard's local deadline (unless renewed), when
	// the shard moves to another member, and when Run returns; it carries
	// the shard's fence (fencing.FromContext). It may block, running the
	// shard's work until ctx ends, or return at once. Shards' callbacks
	// run concurrently, each shard's in order.
	OnAssigned func(ctx context.Context, s Shard)
	// OnRevoked is called once for every OnAssigned, after its context
	// ended and it returned; the shard is released only afterwards, so
	// that its next owner starts once this one stopped. Optional.
	OnRevoked func(s Shard, reason DemotionReason)
	// Weight is this member's capacity relative to the others': it holds
	// about Shards·Weight/(sum of the weights) shards. 0 means 1; at most
	// 9999.
	Weight int
	// Timing is every shard's lease's and the membership heartbeat's, as
	// a Candidate's; PollInterval is how often a member waiting for a
	// shard reads it. ColdPollInterval must be zero.
	Timing
	// Runtime is the process's: ID (it must differ between members),
	// Clock, Logger, wake-ups (by default on: see Runtime.WakeAddr), ...
	// The metrics are the store calls, terms and demotions under
	// group=Name, and tenure.group.shards.held.
	Runtime
	// StrongPolls makes a waiting member poll a shard with strongly
	// consistent reads where the store offers cheaper ones.
	StrongPolls bool
	// Watch makes each member also wait on the shards that would fall to it
	// were their owner to die, polling them as a lock's waiter does: a
	// crashed member's shards are then taken within the lock's failover
	// bound, instead of after the others suspect it (three beats more).
	// It costs a read per shard per PollInterval for the whole group
	// (tenure plan --shards K --members N --watch).
	Watch bool
}

// Shard is a shard of a group held by this member, for one term.
type Shard struct {
	Group string // the group's name
	ID    int    // 0 to Shards-1
	// Term is this member's term on the shard's lease (Lease is
	// Group/ID): its token is above every earlier holder's of this shard,
	// and its Fence is what the shard's writes present to a fenced
	// resource. Renewals move the deadline (the context's Deadline has the
	// current one).
	Term
}

// GroupStatus is a snapshot of what a member knows.
type GroupStatus struct {
	Group  string
	ID     string // this member's
	Key    string // its key in the membership record
	Shards int
	// Members are the live members as this one sees them: ID (where
	// known), key and weight.
	Members []GroupMember
	// Held lists the shards this member holds; Share is how many it
	// should hold as it last computed (⌊K/N⌋ or ⌈K/N⌉ of equal weights).
	Held  []int
	Share int
	// Balanced: it holds exactly the shards it should.
	Balanced bool
	// Err is the last store error, if any.
	Err error
}

// GroupMember is a member of a group as the membership record shows it.
type GroupMember struct {
	// ID is the member's ID, once this member has seen it hold a shard
	// (the membership record keeps keys only); "" until then.
	ID     string
	Key    string
	Weight int
}

// Group is one member of a group of processes that share Shards shards of
// work: each shard is a lease held by at most one member at a time, with
// its own fencing tokens; the members spread the shards evenly between
// them, hand them over when one joins or leaves, and take over those of
// a member that died. See docs/groups.md for what it guarantees.
type Group struct {
	cfg  GroupConfig
	lock *election.Config
	e    groupEntry
	h    *host.Host

	ms       *metrics
	reg      metric.Registration
	held     atomic.Int64
	answered lastAnswer
	flood    engine.FloodGuard // repeated warnings counted, not repeated
	started  atomic.Bool
	running  atomic.Bool

	wakeAddr  string
	wakes     *sender
	closeWake func()                     // once the loop ended: send the last wake-ups, close the listener
	feeds     map[int]context.CancelFunc // the loop's: the change feed of each shard waited for

	mu       sync.Mutex // guards panicked and final
	panicked *CallbackPanic
	final    GroupStatus
}

// groupEntry is what the Group keeps of its member's campaign, which runs
// as an engine.Member in its host: the callbacks of each shard's term. It
// is the member's engine.MemberEffects. Every field is the loop's.
type groupEntry struct {
	g     *Group
	m     *engine.Member
	c     *groupcore.Campaign
	terms []*shardTerm
}

// shardTerm is one term of a shard: its context, and why it ended.
type shardTerm struct {
	ctx     engine.TermContext
	s       Shard
	reason  DemotionReason // set before revoked is closed
	revoked chan struct{}  // closed by the loop once the term ended
}

// Validate checks every field, with the defaults filled in where a field
// is zero, as NewGroup does, and changes nothing.
func (c GroupConfig) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults filled in, checked.
func (c GroupConfig) resolved() (GroupConfig, error) {
	bad := func(field, reason string) error {
		return fieldError(&election.FieldError{Field: field, Reason: reason})
	}
	switch {
	case c.Store == nil:
		return c, bad("Store", "is nil")
	case c.OnAssigned == nil:
		return c, bad("OnAssigned", "is nil")
	case c.Shards < 1 || c.Shards > groupcore.MaxShards:
		return c, bad("Shards", fmt.Sprintf("is %d: a group has 1 to %d", c.Shards, groupcore.MaxShards))
	case c.Weight < 0 || c.Weight > groupcore.MaxWeight:
		return c, bad("Weight", fmt.Sprintf("is %d: 0 (1) to %d", c.Weight, groupcore.MaxWeight))
	}
	if err := ValidateName(c.Name); err != nil {
		return c, fieldError(&election.FieldError{Field: "Name", Err: err})
	}
	for _, n := range []string{groupcore.ShardName(c.Name, c.Shards-1), c.Name + groupcore.MembersSuffix} {
		if err := lease.ValidateName(n); err != nil {
			return c, fieldError(&election.FieldError{Field: "Name", Reason: fmt.Sprintf("too long for the group's records (%q)", n), Err: err})
		}
	}
	if err := checkWake(c.WakeAddr, c.WakeAdvertise, "WakeAddr", "WakeAdvertise"); err != nil {
		return c, fieldError(err)
	}
	if err := noColdPolls(c.Timing, "a group"); err != nil {
		return c, err
	}
	c.Timing = c.Timing.WithDefaults()
	c.Runtime = c.Runtime.withDefaults()
	lc := c.machine(c.Timing, nil, staleReads(c.Store, c.StrongPolls))
	if err := lc.Validate(); err != nil {
		return c, fieldError(err)
	}
	return c, nil
}

// NewGroup returns a member of the group cfg names; Run runs it.
func NewGroup(cfg GroupConfig) (*Group, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	lc := cfg.machine(cfg.Timing, nil, staleReads(cfg.Store, cfg.StrongPolls))
	g := &Group{cfg: cfg, lock: &lc, closeWake: func() {}, feeds: map[int]context.CancelFunc{}}
	var meter metric.Meter
	if g.ms, meter, err = newMetrics(cfg.MeterProvider, attribute.String("group", cfg.Name)); err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	held, err := meter.Int64ObservableGauge("tenure.group.shards.held", metric.WithDescription("Shards of a group this member holds."), metric.WithUnit("{shard}"))
	if err == nil {
		g.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(held, g.held.Load(), metric.WithAttributes(attribute.String("group", cfg.Name), attribute.String("member", cfg.ID)))
			return nil
		}, held)
	}
	if err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	g.e = groupEntry{g: g, terms: make([]*shardTerm, cfg.Shards)}
	g.final = GroupStatus{Group: cfg.Name, ID: cfg.ID, Key: groupcore.Key(cfg.ID), Shards: cfg.Shards}
	return g, nil
}

// ID returns the identity this member writes into the records.
func (g *Group) ID() string { return g.cfg.ID }

// WakeAddr returns the address this member publishes for wake-ups while
// Run runs, or "" without one.
func (g *Group) WakeAddr() string { return g.wakeAddr }

// Run runs the member until ctx is done: it joins the group, holds and
// renews the shards that fall to it, and hands them over as members come
// and go. When ctx is done it leaves: it drops its membership entry,
// ends every shard's term, waits for the callbacks to return, releases
// the shards and wakes their next owners, within ReleaseTimeout (a
// release the store does not confirm in time expires instead). It
// returns nil then, or, at once, an error wrapping lease.ErrPermanent
// when the store refuses the group's records for good (no such table or
// bucket, access denied). Run may be called once.
func (g *Group) Run(ctx context.Context) error {
	if !g.started.CompareAndSwap(false, true) {
		return errors.New("tenure: Group.Run called twice")
	}
	defer func() { _ = g.reg.Unregister() }()
	g.h = host.New(host.Config{
		Clock: g.cfg.Clock, Store: g.cfg.Store, Context: context.WithoutCancel(ctx),
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			g.ms.storeCall(opName(kind), err, took)
			g.answered.note(g.cfg.Clock, err)
		},
		After: func() {
			if g.e.c.Done() {
				g.h.Exit()
			}
			g.syncFeed()
		},
	})
	conn, addr, err := g.bindWake()
	if err != nil {
		return err
	}
	m, err := engine.NewMember(g.h.Core, &g.e, groupcore.CampaignConfig{
		Name: g.cfg.Name, Shards: g.cfg.Shards, ID: g.cfg.ID, Weight: g.cfg.Weight, Addr: addr, Lock: g.lock, Watch: g.cfg.Watch,
	})
	if err != nil {
		if conn != nil {
			_ = conn.Close()
		}
		return fmt.Errorf("tenure: group %q: %w", g.cfg.Name, err)
	}
	if t, ok := g.cfg.Store.(engine.Tapped); ok {
		m.Tap(t.TapMember())
	}
	c := m.Campaign()
	g.e.m, g.e.c = m, c
	if conn != nil {
		g.wakeAddr = addr
		g.serveWake(conn, addr)
	}
	g.log(slog.LevelInfo, "joining the group", "shards", g.cfg.Shards, "key", c.Key())
	g.running.Store(true)
	c.Start()
	g.h.Run(ctx.Done(), c.Leave)
	g.mu.Lock()
	g.final = g.e.status()
	g.mu.Unlock()
	g.running.Store(false)
	g.closeWake()
	g.stopFeeds()
	g.h.Wait()
	g.log(slog.LevelInfo, "left the group")
	g.mu.Lock()
	p := g.panicked
	g.mu.Unlock()
	if p != nil {
		panic(p)
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("tenure: group %q: %w", g.cfg.Name, err)
	}
	return nil
}

// Status returns what this member knows now.
func (g *Group) Status() GroupStatus {
	if g.running.Load() {
		ch := make(chan GroupStatus, 1)
		if g.h.Do(func() { ch <- g.e.status() }) {
			return <-ch
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.final
}

// LastAnswer returns the local time the store last answered one of this
// member's calls; zero before the first.
func (g *Group) LastAnswer() time.Time { return g.answered.get() }

func (e *groupEntry) status() GroupStatus {
	g, c := e.g, e.c
	st := GroupStatus{Group: g.cfg.Name, ID: g.cfg.ID, Key: c.Key(), Shards: g.cfg.Shards, Share: c.Wanted(), Err: c.StoreErr()}
	for _, m := range c.Live() {
		st.Members = append(st.Members, GroupMember{ID: c.ID(m.Key), Key: m.Key, Weight: m.Weight})
	}
	for i := range g.cfg.Shards {
		if c.Held(i) {
			st.Held = append(st.Held, i)
		}
	}
	st.Balanced = len(st.Held) == st.Share && c.HeldCount() == st.Share
	if err := c.Err(); err != nil {
		st.Err = err
	}
	return st
}

// bindWake opens the wake-up listener, where one is wanted, and returns
// it with the address to publish; nil without one.
func (g *Group) bindWake() (seam.WakeConn, string, error) {
	listen := g.cfg.WakeAddr
	if listen == "" {
		listen = defaultWakeAddr(g.cfg.Store)
	}
	if listen == NoWake {
		return nil, "", nil
	}
	conn, addr, err := wakeNet(g.cfg.Store).Listen(listen, g.cfg.WakeAdvertise)
	switch {
	case err != nil && g.cfg.WakeAddr != "":
		return nil, "", err
	case err != nil:
		g.log(slog.LevelWarn, "no wake-ups: a shard handed over is found at the next poll (set WakeAddr)", "err", err)
		return nil, "", nil
	}
	return conn, addr, nil
}

// serveWake passes the wake-ups conn receives to the campaign, and sends
// the campaign's, until the loop ends.
func (g *Group) serveWake(conn seam.WakeConn, addr string) {
	g.wakes = newSender(conn, 256, g.log)
	prefix := wakeMsg(g.cfg.Name + "/")
	g.h.Go(func() {
		buf := make([]byte, len(prefix)+16)
		for {
			n, err := conn.Recv(buf)
			if err != nil {
				return // closed
			}
			i, err := strconv.Atoi(strings.TrimPrefix(string(buf[:n]), prefix))
			if err != nil || !strings.HasPrefix(string(buf[:n]), prefix) {
				continue
			}
			if !g.h.Do(func() { g.e.m.Woken(i) }) {
				return
			}
		}
	})
	sent := make(chan struct{})
	g.h.Go(func() { g.wakes.run(g.h.Quit()); close(sent) })
	g.closeWake = func() {
		<-sent // the last wake-ups go out first
		_ = conn.Close()
	}
	g.log(slog.LevelInfo, "listening for wake-ups", "addr", conn.Addr(), "advertised", addr)
}

func (g *Group) log(level slog.Level, msg string, args ...any) {
	if lg := g.cfg.Logger; lg != nil {
		g.flood.Log(lg, g.cfg.Clock.Now(), level, msg, append([]any{"id", g.cfg.ID, "group", g.cfg.Name}, args...)...)
	}
}

// The engine.MemberEffects of the group.

func (e *groupEntry) Now() time.Time { return e.g.cfg.Clock.Now() }

func (e *groupEntry) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelError {
		e.g.ms.Anomaly()
	}
	e.g.log(level, msg, args...)
}

func (e *groupEntry) Assigned(shard int, t election.Term) {
	g := e.g
	st := &shardTerm{s: Shard{Group: g.cfg.Name, ID: shard, Term: Term{Lease: groupcore.ShardName(g.cfg.Name, shard), Holder: g.cfg.ID, Token: t.Token, Deadline: t.Deadline}}, revoked: make(chan struct{})}
	st.ctx.Init(context.Background(), Term{Lease: st.s.Lease, Holder: g.cfg.ID, Token: st.s.Token, Deadline: t.Deadline}, g.cfg.Clock)
	e.terms[shard] = st
	g.held.Add(1)
	g.ms.Elected()
	g.log(slog.LevelInfo, "shard assigned", "shard", shard, "token", st.s.Token)
	g.h.Go(func() { g.runTerm(st) })
}

// runTerm runs a shard's term's callbacks, in order, and then lets the
// campaign release the shard.
func (g *Group) runTerm(st *shardTerm) {
	ok := call("OnAssigned", func() { g.cfg.OnAssigned(&st.ctx, st.s) }, g.panic)
	// The context may end at the deadline on the callback's own goroutine
	// (its Err reads the clock), before the loop has revoked the term and
	// said why: OnRevoked waits for the loop.
	<-st.ctx.Done()
	<-st.revoked
	if ok && g.cfg.OnRevoked != nil {
		call("OnRevoked", func() { g.cfg.OnRevoked(st.s, st.reason) }, g.panic)
	}
	g.h.Do(func() { g.e.m.Returned(st.s.ID) })
}

// panic keeps a callback's panic for Run, and leaves the group: its
// shards are handed over before Run panics with it.
func (g *Group) panic(p *CallbackPanic) {
	g.mu.Lock()
	if g.panicked == nil {
		g.panicked = p
	}
	g.mu.Unlock()
	g.log(slog.LevelError, "callback panicked: leaving the group", "callback", p.Callback, "panic", p.Value)
	g.h.Do(func() { g.e.c.Leave() })
}

func (e *groupEntry) Publish(shard int, s driver.Snapshot) {
	if st := e.terms[shard]; st != nil {
		engine.FollowJeopardy(&st.ctx, e.g.cfg.Clock.Now(), s, e.g.ms, e.g.log, "shard", shard)
		st.ctx.Announce()
	}
}

func (e *groupEntry) Revoked(shard int, t election.Term, r election.Reason) {
	g, st := e.g, e.terms[shard]
	if st == nil {
		return
	}
	e.terms[shard] = nil
	g.held.Add(-1)
	st.reason = DemotionReason(r)
	close(st.revoked)
	g.ms.Demoted(st.reason)
	engine.FollowJeopardy(&st.ctx, g.cfg.Clock.Now(), driver.Snapshot{}, g.ms, g.log, "shard", shard) // over with the term
	st.ctx.Announce()
	st.ctx.Cancel(&TermEndedError{Lease: st.s.Lease, Token: st.s.Token, Reason: st.reason})
	level := slog.LevelInfo
	if r != election.ReasonShutDown && r != election.ReasonHandedOver {
		level = slog.LevelWarn
	}
	g.log(level, "shard revoked", "shard", shard, "token", t.Token, "reason", st.reason.String())
}

func (e *groupEntry) Wake(addr string, shard int) {
	if w := e.g.wakes; w != nil {
		w.send(addr, wakeMsg(groupcore.ShardName(e.g.cfg.Name, shard)))
	}
}

func (e *groupEntry) Changed(live []groupcore.Member) {
	e.g.log(slog.LevelInfo, "members changed", "members", len(live))
}

// Done: the host's After ends the loop.
func (e *groupEntry) Done() {}
