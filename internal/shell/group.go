package shell

import (
	"context"
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
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

// GroupConfig is what a Group's shell needs: tenure.GroupConfig,
// resolved.
type GroupConfig struct {
	Campaign groupcore.CampaignConfig // its Addr is the shell's to fill in
	Store    lease.Store
	Clock    host.Clock
	Logger   *slog.Logger // nil: none
	// WakeAddr and WakeAdvertise are Runtime's: where to listen for
	// wake-ups (DefaultWakeAddr unless set; NoWake: none).
	WakeAddr, WakeAdvertise string
	Metrics                 *Metrics
	Meter                   metric.Meter // Metrics', for tenure.group.shards.held
	// The program's callbacks: OnAssigned runs a shard's term t (its Lease
	// and Holder set); OnRevoked, nil for none, follows it.
	OnAssigned func(ctx context.Context, shard int, t election.Term)
	OnRevoked  func(shard int, t election.Term, r election.Reason)
	// Panicked makes what Run panics with after callback panicked with
	// value: a *tenure.CallbackPanic.
	Panicked func(callback string, value any, stack []byte) any
	// Ended makes the cause of an ended term's context
	// (tenure.TermEndedError).
	Ended func(lease string, token fencing.Token, reason election.Reason) error
}

// Group runs a member of a tenure.Group: a host (internal/host) with the
// member's campaign (engine.Member) on the goroutine that calls Run, each
// shard's term's callbacks on a goroutine of its own, the wake-up listener
// and its sender, the store's change feed for the shards waited for, and
// the metrics. It is the member's engine.MemberEffects.
type Group struct {
	cfg GroupConfig
	h   *host.Host

	m     *engine.Member
	c     *groupcore.Campaign
	terms []*shardTerm // the loop's

	reg      metric.Registration
	held     atomic.Int64
	answered LastAnswer
	flood    engine.FloodGuard // repeated warnings counted, not repeated
	running  atomic.Bool

	wakeAddr  atomic.Pointer[string]
	wakes     *Sender
	closeWake func()                     // once the loop ended: send the last wake-ups, close the listener
	feeds     map[int]context.CancelFunc // the loop's: the change feed of each shard waited for

	mu       sync.Mutex // guards panicked and final
	panicked any
	final    GroupStatus
}

// GroupStatus is what a member knows (tenure.GroupStatus, but for the
// members' IDs, which IDs gives).
type GroupStatus struct {
	Key      string
	Members  []groupcore.Member
	IDs      []string // of Members, where known
	Held     []int
	Share    int
	Balanced bool
	Err      error
}

// shardTerm is one term of a shard: its context, and why it ended.
type shardTerm struct {
	ctx     engine.TermContext
	shard   int
	t       election.Term
	reason  election.Reason // set before revoked is closed
	revoked chan struct{}   // closed by the loop once the term ended
}

// NewGroup returns the shell of a member configured by cfg.
func NewGroup(cfg GroupConfig) (*Group, error) {
	g := &Group{cfg: cfg, closeWake: func() {}, feeds: map[int]context.CancelFunc{}, terms: make([]*shardTerm, cfg.Campaign.Shards)}
	held, err := cfg.Meter.Int64ObservableGauge("tenure.group.shards.held", metric.WithDescription("Shards of a group this member holds."), metric.WithUnit("{shard}"))
	if err == nil {
		g.reg, err = cfg.Meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(held, g.held.Load(), metric.WithAttributes(attribute.String("group", cfg.Campaign.Name), attribute.String("member", cfg.Campaign.ID)))
			return nil
		}, held)
	}
	if err != nil {
		return nil, fmt.Errorf("tenure: metrics: %w", err)
	}
	g.final.Key = groupcore.Key(cfg.Campaign.ID)
	return g, nil
}

// WakeAddr returns the address the member publishes for wake-ups while
// Run runs, or "" without one.
func (g *Group) WakeAddr() string {
	if a := g.wakeAddr.Load(); a != nil {
		return *a
	}
	return ""
}

// LastAnswer returns when the store last answered one of the member's
// calls.
func (g *Group) LastAnswer() time.Time { return g.answered.Get() }

// Held returns how many shards the member holds.
func (g *Group) Held() int64 { return g.held.Load() }

// Running reports whether Run runs.
func (g *Group) Running() bool { return g.running.Load() }

// Run runs the member until ctx is done (tenure.Group.Run). Call it once.
func (g *Group) Run(ctx context.Context) error {
	cfg := &g.cfg
	defer func() { _ = g.reg.Unregister() }()
	g.h = host.New(host.Config{
		Clock: cfg.Clock, Store: cfg.Store, Context: context.WithoutCancel(ctx),
		Observe: func(kind election.OpKind, err error, took time.Duration) {
			cfg.Metrics.StoreCall(kind, err, took)
			g.answered.Note(cfg.Clock, err)
		},
		After: func() {
			if g.c.Done() {
				g.h.Exit()
			}
			g.syncFeed()
		},
	})
	conn, addr, err := g.bindWake()
	if err != nil {
		return err
	}
	cc := cfg.Campaign
	cc.Addr = addr
	m, err := engine.NewMember(g.h.Core, g, cc)
	if err != nil {
		if conn != nil {
			_ = conn.Close()
		}
		return fmt.Errorf("tenure: group %q: %w", cc.Name, err)
	}
	if t, ok := cfg.Store.(engine.Tapped); ok {
		m.Tap(t.TapMember())
	}
	c := m.Campaign()
	g.m, g.c = m, c
	if conn != nil {
		g.wakeAddr.Store(&addr)
		g.serveWake(conn, addr)
	}
	g.log(slog.LevelInfo, "joining the group", "shards", cc.Shards, "key", c.Key())
	g.running.Store(true)
	c.Start()
	g.h.Run(ctx.Done(), c.Leave)
	g.mu.Lock()
	g.final = g.status()
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
		return fmt.Errorf("tenure: group %q: %w", cc.Name, err)
	}
	return nil
}

// Status returns what the member knows now.
func (g *Group) Status() GroupStatus {
	if g.running.Load() {
		ch := make(chan GroupStatus, 1)
		if g.h.Do(func() { ch <- g.status() }) {
			return <-ch
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.final
}

func (g *Group) status() GroupStatus {
	c := g.c
	st := GroupStatus{Key: c.Key(), Share: c.Wanted(), Err: c.StoreErr()}
	for _, m := range c.Live() {
		st.Members = append(st.Members, m)
		st.IDs = append(st.IDs, c.ID(m.Key))
	}
	for i := range g.cfg.Campaign.Shards {
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
		listen = DefaultWakeAddr(g.cfg.Store)
	}
	if listen == NoWake {
		return nil, "", nil
	}
	conn, addr, err := WakeNet(g.cfg.Store).Listen(listen, g.cfg.WakeAdvertise)
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
	g.wakes = NewSender(conn, 256, g.log)
	prefix := WakeMsg(g.cfg.Campaign.Name + "/")
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
			if !g.h.Do(func() { g.m.Woken(i) }) {
				return
			}
		}
	})
	sent := make(chan struct{})
	g.h.Go(func() { g.wakes.Run(g.h.Quit()); close(sent) })
	g.closeWake = func() {
		<-sent // the last wake-ups go out first
		_ = conn.Close()
	}
	g.log(slog.LevelInfo, "listening for wake-ups", "addr", conn.Addr(), "advertised", addr)
}

// syncFeed listens, on a store with a change feed (lease.Watcher), for
// the writes of each shard the member waits for (groupcore.Campaign's
// Waiting), and stops listening to the others: an event makes the
// shard's lock read at once, so that a shard handed over reaches its next
// owner a round trip after its release, without a wake-up address. (A
// shard a leaving member gives back is not waited for until its next
// owner's beat shows the leave: it goes over then.) Run on the loop after
// every event.
func (g *Group) syncFeed() {
	w, ok := g.cfg.Store.(lease.Watcher)
	if !ok {
		return
	}
	for i := range g.cfg.Campaign.Shards {
		stop, on := g.feeds[i]
		switch want := g.c.Waiting(i); {
		case want && !on:
			ctx, cancel := context.WithCancel(context.Background())
			g.feeds[i] = cancel
			name := groupcore.ShardName(g.cfg.Campaign.Name, i)
			g.h.Go(func() {
				// Every event, the first ("listening") too: the shard's
				// lock may have read it before the feed listened, and
				// missed its release.
				err := w.Watch(ctx, name, func(ev lease.Event) {
					if !g.h.Do(func() { g.c.Noticed(i, ev) }) {
						cancel() // the run is over
					}
				})
				if ctx.Err() == nil {
					g.log(slog.LevelWarn, "no change feed from the store: waiting for the shard by polls", "shard", i, "err", err)
				}
			})
		case !want && on:
			stop()
			delete(g.feeds, i)
		}
	}
}

// stopFeeds stops every shard's feed, once the loop has ended.
func (g *Group) stopFeeds() {
	for i, stop := range g.feeds {
		stop()
		delete(g.feeds, i)
	}
}

func (g *Group) log(level slog.Level, msg string, args ...any) {
	if lg := g.cfg.Logger; lg != nil {
		g.flood.Log(lg, g.cfg.Clock.Now(), level, msg, append([]any{"id", g.cfg.Campaign.ID, "group", g.cfg.Campaign.Name}, args...)...)
	}
}

// runTerm runs a shard's term's callbacks, in order, and then lets the
// campaign release the shard.
func (g *Group) runTerm(st *shardTerm) {
	ok := call("OnAssigned", func() { g.cfg.OnAssigned(&st.ctx, st.shard, st.t) }, g.panic)
	// The context may end at the deadline on the callback's own goroutine
	// (its Err reads the clock), before the loop has revoked the term and
	// said why: OnRevoked waits for the loop.
	<-st.ctx.Done()
	<-st.revoked
	if ok && g.cfg.OnRevoked != nil {
		call("OnRevoked", func() { g.cfg.OnRevoked(st.shard, st.t, st.reason) }, g.panic)
	}
	g.h.Do(func() { g.m.Returned(st.shard) })
}

// panic keeps a callback's panic for Run, and leaves the group: its
// shards are handed over before Run panics with it.
func (g *Group) panic(callback string, value any, stack []byte) {
	g.mu.Lock()
	if g.panicked == nil {
		g.panicked = g.cfg.Panicked(callback, value, stack)
	}
	g.mu.Unlock()
	g.log(slog.LevelError, "callback panicked: leaving the group", "callback", callback, "panic", value)
	g.h.Do(func() { g.c.Leave() })
}

// The engine.MemberEffects of the group.

func (g *Group) Now() time.Time { return g.cfg.Clock.Now() }

func (g *Group) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelError {
		g.cfg.Metrics.Anomaly()
	}
	g.log(level, msg, args...)
}

func (g *Group) Assigned(shard int, t election.Term) {
	name := groupcore.ShardName(g.cfg.Campaign.Name, shard)
	term := election.Term{Lease: name, Holder: g.cfg.Campaign.ID, Token: t.Token, Deadline: t.Deadline}
	st := &shardTerm{shard: shard, t: term, revoked: make(chan struct{})}
	st.ctx.Init(context.Background(), term, g.cfg.Clock)
	g.terms[shard] = st
	g.held.Add(1)
	g.cfg.Metrics.Elected()
	g.log(slog.LevelInfo, "shard assigned", "shard", shard, "token", term.Token)
	g.h.Go(func() { g.runTerm(st) })
}

func (g *Group) Publish(shard int, s driver.Snapshot) {
	if st := g.terms[shard]; st != nil {
		engine.FollowJeopardy(&st.ctx, g.cfg.Clock.Now(), s, g.cfg.Metrics, g.log, "shard", shard)
		st.ctx.Announce()
	}
}

func (g *Group) Revoked(shard int, t election.Term, r election.Reason) {
	st := g.terms[shard]
	if st == nil {
		return
	}
	g.terms[shard] = nil
	g.held.Add(-1)
	st.reason = r
	close(st.revoked)
	g.cfg.Metrics.Demoted(r)
	engine.FollowJeopardy(&st.ctx, g.cfg.Clock.Now(), driver.Snapshot{}, g.cfg.Metrics, g.log, "shard", shard) // over with the term
	st.ctx.Announce()
	st.ctx.Cancel(g.cfg.Ended(st.t.Lease, st.t.Token, r))
	level := slog.LevelInfo
	if r != election.ReasonShutDown && r != election.ReasonHandedOver {
		level = slog.LevelWarn
	}
	g.log(level, "shard revoked", "shard", shard, "token", t.Token, "reason", r.String())
}

func (g *Group) Wake(addr string, shard int) {
	if w := g.wakes; w != nil {
		w.Send(addr, WakeMsg(groupcore.ShardName(g.cfg.Campaign.Name, shard)))
	}
}

func (g *Group) Changed(live []groupcore.Member) {
	g.log(slog.LevelInfo, "members changed", "members", len(live))
}

// Done: the host's After ends the loop.
func (g *Group) Done() {}
