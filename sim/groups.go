package sim

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/lockcore"
)

// Group members: the third kind of process. On a group scenario's nodes a
// process runs the code of a tenure.Group member (internal/groupcore's
// Campaign over internal/lockcore's locks): it beats in the membership
// record group::members and holds the shards group/0 … that fall to it.
// Wake-ups, where the plan has a wake network, go to the instance whose
// ID the membership entry names. The checker holds each shard to I1 (at
// most one member believes it holds it) and I2 (its tokens rise), and the
// group to a balance check once the scenario has been quiet for the
// group's settling bound (groupcore.Bounds).

// groupPlan is what a group scenario's members share.
type groupPlan struct {
	Shards int
	// Bounds: a shard given up is held again within the polled handover
	// bound, and a crashed member's within the crash takeover bound
	// (groupcore.Bounds, at the store's latency bound), unless another
	// fault came meanwhile. Off where faults (pauses, cut-offs, errors)
	// delay the store beyond its latency.
	Bounds bool
	// Watch: members run with GroupConfig.Watch, and a crashed member's
	// shards are held to the lock's failover bound.
	Watch bool
	// Moves: membership changes (members started after the first of each
	// node, and stopped) move few shards: at the end, the shard grants
	// number at most K and, per change, 2·⌈K/(N−1)⌉ (a join or a leave
	// moves about K/N; a reshuffle moves about K).
	Moves bool
}

// shardFree is when a shard's last hold ended, and why.
type shardFree struct {
	at, upset time.Duration // true time; the world's last fault then
	crashed   time.Duration // and a member's last crash then; 0: none
	crash     bool
}

const groupName = "group"

// groupScenario makes a scenario of n nodes running group members, over a
// clean wake network; build adds its faults, which must end quiet before
// the run's end (groupQuiet).
func groupScenario(name, summary string, n int, build func(p *plan, r *rand.Rand)) *Scenario {
	return &Scenario{Name: name, Summary: summary, group: true, build: func(p *plan, r *rand.Rand) {
		p.Nodes = p.Nodes[:0]
		for i := range n {
			p.Nodes = append(p.Nodes, newNodeSpec(r, string(rune('a'+i))))
		}
		p.Group = &groupPlan{Shards: 16}
		p.Wake = &wakeFaults{}
		p.Duration = 6 * time.Minute
		build(p, r)
		p.at(p.Duration-time.Millisecond, func(w *world) { w.chk.groupBalanced() })
	}}
}

// groupQuiet is how long before the end a group scenario's last fault
// comes: a crashed member's entry waited out, its shards taken over, and
// the group balanced (groupcore.Bounds at the default timing, 10s lease),
// with room for a restart.
const groupQuiet = 90 * time.Second

// groupMember is a group scenario's process: the production member below
// tenure.Group's API (internal/engine's Member, around one
// groupcore.Campaign) on the production host.Core (engineHost), its
// events told to the checker (memberFx).
type groupMember struct {
	in   *instance
	w    *world
	eng  *engineHost
	m    *engine.Member
	c    *groupcore.Campaign
	dead bool
	// returning: the shards revoked in this event, whose callbacks return
	// once it is over, in order (as tenure.Group's term goroutines hand
	// them back to its loop).
	returning []int
	// real: the real tier's member, a tenure.Group whose events reach the
	// checker through the engine's tap; false on the fast tier.
	real bool
}

func newGroupMember(in *instance) instRuntime {
	w := in.w
	g := &groupMember{in: in, w: w, eng: newEngineHost(in)}
	in.ht = &g.eng.ht
	g.eng.owes = owesNone
	cfg := &election.Config{ID: in.ID, Timing: in.timing, Rand: w.machineRand(in), Wall: in.wallNow, StaleReads: w.plan.StaleReads, ClockTokens: w.clockTokens()}
	cc := groupcore.CampaignConfig{Name: groupName, Shards: w.plan.Group.Shards, ID: in.ID, Lock: cfg, Watch: w.plan.Group.Watch}
	if w.plan.Wake != nil {
		cc.Addr = in.ID + ":1" // the instance's ID is its host
	}
	if w.opt.Strategy == Naive {
		cc.Machine = func() (lockcore.Machine, error) { return newNaive(*cfg, in.wallNow), nil }
	}
	m, err := engine.NewMember(g.eng.core, (*memberFx)(g), cc)
	if err != nil {
		panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the timing passed Validate
	}
	g.m, g.c = m, m.Campaign()
	return g
}

func (g *groupMember) now() time.Time { return g.in.local() }

func (g *groupMember) trace(s string) { g.w.trace(g.in, line{what: mFault, text: s}) }

func (g *groupMember) start() {
	g.w.chk.gjoined = g.w.now
	g.w.chk.gstarts++
	g.c.Start()
	g.arm()
}

// stop: Run's context is done: the member leaves, handing its shards over.
func (g *groupMember) stop() {
	if !g.w.ending {
		g.w.chk.gstops++
	}
	g.c.Leave()
	g.arm()
}

func (g *groupMember) crash() {
	g.dead = true
	g.eng.stop()
	g.in.finished = true
	g.w.running--
}

func (g *groupMember) observed() election.Leader { return election.Leader{} }
func (g *groupMember) poll()                     {}

// arm hands back the shards revoked, as their callbacks return, then sets
// the host's timer.
func (g *groupMember) arm() {
	if g.dead {
		return
	}
	for len(g.returning) > 0 {
		shard := g.returning[0]
		g.returning = g.returning[1:]
		g.c.Returned(shard)
	}
	g.eng.arm()
}

func (g *groupMember) settleOwed() {
	if g.dead {
		g.eng.ht.owed = false
		return
	}
	g.eng.settleOwed()
}

func (g *groupMember) fire(tm *timer) {
	if !g.dead && g.eng.fired(tm) {
		g.arm()
	}
}

func (g *groupMember) deliver(r *request) {
	if !g.dead {
		g.eng.deliver(r)
		g.arm()
	}
}

func (g *groupMember) release(r *request) { g.eng.release(r) }

// woken takes a wake-up for a shard of the group.
func (g *groupMember) woken(lock string) {
	i, err := strconv.Atoi(strings.TrimPrefix(lock, groupName+"/"))
	if g.dead || err != nil {
		return
	}
	g.tookWake(i)
	g.c.Woken(i)
	g.arm()
}

// tookWake: the member takes a wake-up for shard.
func (g *groupMember) tookWake(shard int) {
	g.trace("woken for " + groupcore.ShardName(groupName, shard))
}

// memberFx is the member's engine.MemberEffects: the checker's view of
// its shards.
type memberFx groupMember

func (f *memberFx) g() *groupMember { return (*groupMember)(f) }

func (f *memberFx) Now() time.Time { return f.g().now() }

func (f *memberFx) Log(level slog.Level, msg string, args ...any) {}

func (f *memberFx) Assigned(shard int, t election.Term) {
	g := f.g()
	name := groupcore.ShardName(groupName, shard)
	g.trace("assigned " + name + ", token " + strconv.FormatUint(uint64(t.Token), 10))
	if g.w.opt.Strategy == Naive {
		t.Deadline = time.Time{} // nothing to check it by
	}
	g.w.chk.shardGranted(g.in, name, t)
}

func (f *memberFx) Publish(shard int, s driver.Snapshot) {
	g := f.g()
	if s.Leading && g.w.opt.Strategy != Naive {
		g.w.chk.shardExtended(g.in, groupcore.ShardName(groupName, shard), s.Term.Deadline)
	}
}

// Revoked: the shard's work stops, and its callbacks return at the next
// event of the member's callback goroutine.
func (f *memberFx) Revoked(shard int, t election.Term, r election.Reason) {
	g := f.g()
	name := groupcore.ShardName(groupName, shard)
	g.trace("revoked " + name + ": " + r.String())
	g.w.chk.shardEnded(g.in, name)
	if !g.real {
		g.returning = append(g.returning, shard)
	}
}

func (f *memberFx) Wake(addr string, shard int) {
	g := f.g()
	host, _, _ := strings.Cut(addr, ":")
	name := groupcore.ShardName(groupName, shard)
	g.trace("wake " + host + " for " + name)
	if !g.real { // the real Group's sender sends it (srcSend)
		g.w.stage(item{in: g.in, src: srcSend, kind: itWake, s: host, msg: wakePrefix + name})
	}
}

func (f *memberFx) Changed(live []groupcore.Member) {
	f.g().trace("members: " + strconv.Itoa(len(live)))
}

// Done: the member left (or the store refused it): Run returns.
func (f *memberFx) Done() {
	g := f.g()
	if g.real {
		return // Run returns
	}
	g.eng.stop()
	g.w.stage(item{in: g.in, src: srcRun, kind: itRunDone})
}

// The checker's part (checker.go holds the state): each shard's holds.

// shardGranted: in holds shard name for term t. No other member may
// believe it holds it (I1); its token is above every earlier one (I2).
func (c *checker) shardGranted(in *instance, name string, t election.Term) {
	if f, ok := c.gfree[name]; ok {
		delete(c.gfree, name)
		c.shardUnowned(in, name, f)
	}
	for _, o := range c.w.insts {
		if h := c.gopen[o][name]; h != nil && o != in && c.believes(h) {
			c.violate(OneLeader, in, fmt.Sprintf("%s is granted %s (token %d) while %s believes it holds it (token %d)", in.label, name, t.Token, o.label, h.tok))
		}
	}
	if uint64(t.Token) <= c.lockTok[name] {
		c.violate(Tokens, in, fmt.Sprintf("%s is granted %s with token %d, not above %d granted before", in.label, name, t.Token, c.lockTok[name]))
	}
	c.lockTok[name] = max(c.lockTok[name], uint64(t.Token))
	c.ggrants++
	if c.gopen[in] == nil {
		c.gopen[in] = map[string]*term{}
	}
	h := &term{in: in, tok: uint64(t.Token), start: c.w.now, end: -1, lock: name, deadline: t.Deadline}
	c.gopen[in][name] = h
	c.terms = append(c.terms, h)
	c.stats.Terms++
}

func (c *checker) shardExtended(in *instance, name string, deadline time.Time) {
	if h := c.gopen[in][name]; h != nil && c.believes(h) {
		h.deadline = deadline
	}
}

func (c *checker) shardEnded(in *instance, name string) {
	c.shardEnd(in, name, false)
}

func (c *checker) shardEnd(in *instance, name string, crash bool) {
	if h := c.gopen[in][name]; h != nil {
		c.gfree[name] = shardFree{at: c.w.now, upset: c.w.upset, crashed: c.gcrashed, crash: crash}
		delete(c.gopen[in], name)
		h.end = c.w.now
		if tl := c.w.tl; tl != nil {
			tl.term(h)
		}
	}
}

// endShards ends every hold of in (a crash, or the end of the run), in
// name order.
func (c *checker) endShards(in *instance, crash bool) []string {
	names := make([]string, 0, len(c.gopen[in]))
	for name := range c.gopen[in] {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c.shardEnd(in, name, crash)
	}
	return names
}

// shardUnowned holds the time a shard went unowned, from the end of its
// last hold to the grant now, to the group's bounds (Plan.Group.Bounds),
// unless the bound's premise fails: another fault or a join came
// meanwhile (a joiner starts its own suspicion of a crashed member, and a
// shard may fall to it), a shard was given up on a view that may still
// count a member that crashed (within the membership's wait and a beat
// before), or the shutdown has begun.
func (c *checker) shardUnowned(in *instance, name string, f shardFree) {
	w := c.w
	b := groupcore.NewBounds(in.timing, w.plan.Group.Shards, len(w.nodes), w.plan.Latency.Bound())
	t := b.Timing
	stale := time.Duration(float64(t.LeaseDuration)*(1+t.MaxDrift)) + t.RenewInterval + b.RoundTrip
	if !w.plan.Group.Bounds || w.ending || w.upset > f.upset || c.gjoined > f.at ||
		!f.crash && f.crashed > 0 && f.at-f.crashed < stale {
		return
	}
	bound, what := b.PolledHandover, "given up"
	switch {
	case f.crash && w.plan.Group.Watch:
		bound, what = b.WatchedCrashTakeover, "whose holder crashed (watched)"
	case f.crash:
		bound, what = b.CrashTakeover, "whose holder crashed"
	}
	c.stats.GroupBounds++
	if gap := w.now - f.at; gap > bound {
		c.violate(Liveness, in, fmt.Sprintf("%s, %s at %s, is granted %v later; the bound is %v", name, what, fmtTime(f.at), gap, bound))
	}
}

// groupBalanced: the scenario has been quiet for groupQuiet; every shard is
// held, and each live member holds ⌊K/N⌋ or ⌈K/N⌉.
func (c *checker) groupBalanced() {
	k := c.w.plan.Group.Shards
	var members []*instance
	held := map[string]bool{}
	count := map[*instance]int{}
	for _, in := range c.w.liveInstances() {
		if in.stopped {
			continue
		}
		members = append(members, in)
		for name, h := range c.gopen[in] {
			if c.believes(h) {
				held[name] = true
				count[in]++
			}
		}
	}
	c.stats.GroupChecks++
	n := len(members)
	if n == 0 {
		return
	}
	if len(held) != k {
		c.violate(Liveness, nil, fmt.Sprintf("%v after the last fault, %d of %d shards are held", groupQuiet, len(held), k))
	}
	if c.w.plan.Group.Moves {
		nodes := len(c.w.nodes)
		changes := c.gstarts - nodes + c.gstops
		if limit := k + changes*2*((k+nodes-2)/(nodes-1)); c.ggrants > limit {
			c.violate(Liveness, nil, fmt.Sprintf("%d shard grants for %d shards and %d membership changes: more than %d", c.ggrants, k, changes, limit))
		}
	}
	for _, in := range members {
		if got := count[in]; got != k/n && got != (k+n-1)/n {
			c.violate(Liveness, in, fmt.Sprintf("%v after the last fault, %s holds %d of %d shards over %d members", groupQuiet, in.label, got, k, n))
		}
	}
}

// pickMember returns a live group member, not paused nor cut off; nil if
// none. It draws from the world's generator, in event order.
func (w *world) pickMember() *instance {
	var c []*instance
	for _, in := range w.liveInstances() {
		if !in.paused && !in.node.cut && !in.stopped {
			c = append(c, in)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

// groupSpells plans faults on members at gaps drawn from gap until
// groupQuiet before the end, each for a length drawn from length.
func groupSpells(p *plan, r *rand.Rand, from time.Duration, gap span, length span, fault func(w *world, in *instance, d time.Duration)) {
	for t := from + uniform(r, gap[0], gap[1]); t < p.Duration-groupQuiet; t += uniform(r, gap[0], gap[1]) {
		d := uniform(r, length[0], length[1])
		p.at(t, func(w *world) {
			if in := w.pickMember(); in != nil {
				fault(w, in, d)
			}
		})
	}
}

// stopFor stops in gracefully (it leaves the group) and starts a new
// process on its node d later.
func stopFor(w *world, in *instance, d time.Duration) {
	w.stop(in)
	w.at(w.now+d, nil, func() {
		if !w.ending && in.finished && in.node.cur == in {
			w.restart(in.node, true)
		}
	})
}

// churn starts the members over the first minute, then stops one
// gracefully (one time in stopOneIn) or crashes one every 20 to 40s, each
// to come back 25 to 40s later.
func churn(p *plan, r *rand.Rand, stopOneIn int) {
	for _, n := range p.Nodes {
		n.Start = uniform(r, 0, time.Minute)
	}
	groupSpells(p, r, time.Minute, span{20 * second, 40 * second}, span{25 * second, 40 * second}, func(w *world, in *instance, d time.Duration) {
		if w.rng.IntN(stopOneIn) == 0 {
			stopFor(w, in, d)
		} else {
			crashFor(w, in, d)
		}
	})
}

var groupScenarios = []*Scenario{
	groupScenario("group-churn", "6 members of a 16-shard group join over a minute, then leave gracefully or crash every 20 to 40s and come back 25 to 40s later; each shard held by one member at a time with rising tokens, taken over within the group's bounds, and the group balanced once quiet", 6,
		func(p *plan, r *rand.Rand) {
			p.Group.Bounds = true
			churn(p, r, 2)
		}),
	groupScenario("group-watch", "as group-churn, with Watch: each shard's would-be successor waits on it, and a crashed member's shards are taken within the lock's failover bound", 6,
		func(p *plan, r *rand.Rand) {
			p.Group.Bounds, p.Group.Watch = true, true
			churn(p, r, 3)
		}),
	groupScenario("group-rolling", "every member of a 5-member group is restarted in turn, gracefully, twice: shards handed over and back", 5,
		func(p *plan, r *rand.Rand) {
			p.Group.Bounds, p.Group.Moves = true, true
			t := 30 * second
			for range 2 {
				for i := range p.Nodes {
					p.at(t, func(w *world) {
						if in := w.nodes[i].cur; in != nil && in.live() && !in.stopped {
							stopFor(w, in, uniform(w.rng, second, 5*second))
						}
					})
					t += uniform(r, 10*second, 25*second)
				}
			}
		}),
	groupScenario("group-faults", "members of a 16-shard group pause past the lease, lose the store for 5 to 40s, crash; wall clocks 10 to 60s apart and monotonic clocks drifting at ±ρ; 1% of requests fail", 6,
		func(p *plan, r *rand.Rand) {
			for _, n := range p.Nodes {
				n.skew(uniform(r, -60*second, 60*second))
				n.PPB = rhoPPB
				if r.IntN(2) == 0 {
					n.PPB = -rhoPPB
				}
			}
			p.Faults.ErrorPPM = 10_000
			groupSpells(p, r, 30*second, span{10 * second, 30 * second}, span{2 * second, 40 * second}, func(w *world, in *instance, d time.Duration) {
				switch w.rng.IntN(3) {
				case 0:
					w.pause(in, min(d, 30*second), false)
				case 1:
					cutFor(w, in, d)
				default:
					crashFor(w, in, d)
				}
			})
		}),
}
