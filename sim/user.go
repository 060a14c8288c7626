package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/sim/internal/userworld"
)

// A user's world (package simtest): the real tier's world, whose processes
// run the user's own program rather than the simulator's. The program
// builds its Candidate, Locker or Group on the store and runtime its node
// hands it; the world stages what they do as it stages tenure's own code,
// and holds the program's acts (its effects and its writes to the fenced
// resource) to the store's truth.

func init() {
	userworld.New = newUserWorld
	userworld.Scenarios = func() []string {
		var out []string
		for _, sc := range scenarios {
			if _, err := userScenario(sc.Name); err == nil {
				out = append(out, sc.Name)
			}
		}
		return out
	}
}

// userWorld is what a user's world adds to the world.
type userWorld struct {
	w    *world
	spec userworld.Spec

	guard   fencing.Guard
	highest map[string]fencing.Token // per lease, the highest token the resource accepted
	held    map[string][]string      // per process ID, the names it ever held, in order
	acts    []userworld.Act
	fails   []string
	some    map[string]bool
	notes   []note
	lost    bool // the lease's record was lost or restored
}

// note is a fault the scheduler injected, kept to explain an act that
// overlapped another node's term.
type note struct {
	at   time.Duration
	who  string
	text string
}

// userAct is an act staged by a program, answered once the world took it.
type userAct struct {
	act   userworld.Act
	reply chan error
}

// userScenarios are the scenarios a user's world may draw its faults from:
// those whose faults act on nodes and the store, not on the simulator's own
// lock clients, group members or standby.
func userScenario(name string) (*Scenario, error) {
	sc := Lookup(name)
	if sc == nil {
		return nil, fmt.Errorf("no scenario %q (tenure sim -list lists them)", name)
	}
	if sc.locks || sc.group || sc.standby || strings.HasPrefix(sc.Name, "feed-") || strings.HasPrefix(sc.Name, "prefer-") {
		return nil, fmt.Errorf("scenario %q drives the simulator's own lock clients, group members, standby or feed: a user's world takes the scenarios of a lease's faults", name)
	}
	return sc, nil
}

func newUserWorld(spec userworld.Spec) (userworld.World, error) {
	if spec.Nodes < 1 || spec.Nodes > 26 {
		return nil, fmt.Errorf("%d nodes: want 1 to 26", spec.Nodes)
	}
	if err := lease.ValidateName(spec.Lease); err != nil {
		return nil, err
	}
	if err := spec.Timing.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	if spec.Program == nil {
		return nil, errors.New("no program to run")
	}
	sc := &Scenario{Name: "user", nodes: spec.Nodes, build: func(p *plan, r *rand.Rand) {}}
	if spec.Scenario != "" {
		base, err := userScenario(spec.Scenario)
		if err != nil {
			return nil, err
		}
		if spec.Nodes < 3 || spec.Nodes > 5 {
			return nil, fmt.Errorf("%d nodes: the scenarios' faults are drawn for 3 to 5", spec.Nodes)
		}
		sc.Name, sc.build = base.Name, base.build
	}
	u := &userWorld{spec: spec, highest: map[string]fencing.Token{}, held: map[string][]string{}, some: map[string]bool{}}
	build := sc.build
	sc.build = func(p *plan, r *rand.Rand) {
		build(p, r)
		for _, n := range p.Nodes {
			n.Timing = spec.Timing
		}
		if spec.Duration > 0 {
			p.Duration = spec.Duration
		}
		// Of tenure's own invariants, those that hold of any program:
		// the others watch the simulator's own callbacks and liveness.
		p.Requires &= Of(OneLeader, Tokens)
		p.Failover = false
		if p.Wake == nil {
			p.Wake = &wakeFaults{} // wake-ups, as in production, on a healthy network
		}
	}
	w := newWorld(sc, spec.Seed, Options{Strategy: Tenure, Resource: Fenced, Trace: spec.Trace, Timeline: spec.Timeline},
		func(in *instance) instRuntime {
			return &userProc{realProc: realProc{in: in, gone: make(chan struct{})}, u: u}
		})
	w.lease = spec.Lease
	w.store = newStore(w, w.plan.Latency, w.plan.Faults) // its standby record follows the lease's name
	w.shared = true
	w.settle = w.settleReal
	w.user = u
	u.w = w
	if spec.Script != nil {
		spec.Script(u)
	}
	return u, nil
}

// Run plays the world to its end inside the caller's synctest bubble.
func (u *userWorld) Run() userworld.Outcome {
	w := u.w
	before := bubble()
	w.run()
	synctest.Wait()
	leaked := bubble().since(before)
	for _, g := range leaked {
		u.fail(nil, "a goroutine outlives the run (every goroutine of the program must end once its context is done):\n"+g)
	}
	w.finish()
	r := w.result("user")
	out := userworld.Outcome{Acts: u.acts, Sometimes: u.some, Hash: r.Hash, SimTime: r.SimTime, Events: r.Events, Leaked: len(leaked) > 0}
	promised := r.Requires
	if w.chk.stats.Pauses > 0 {
		promised = promised.Without(OneLeader) // a paused leader believes on: the zombie fencing stops
	}
	if u.lost {
		// A lost or restored record hands out tokens from the past to
		// processes that never saw the later ones (docs/protocol.md, Lost
		// records): a Locker forgets a lock it gave back.
		promised = promised.Without(Tokens)
	}
	for _, v := range r.Violations {
		if promised.Has(v.Inv) {
			out.Failures = append(out.Failures, fmt.Sprintf("tenure's %s (%s) at %s: %s", v.Inv, v.Inv.Name(), clockTime(v.At), v.Msg))
		}
	}
	out.Failures = append(out.Failures, u.fails...)
	if u.spec.Timeline {
		out.SVG = r.WriteSVG
	}
	return out
}

func (u *userWorld) fail(in *instance, msg string) {
	u.fails = append(u.fails, fmt.Sprintf("at %s: %s", clockTime(u.w.now), msg))
	u.w.trace(in, line{what: mBroken, text: msg})
	if tl := u.w.tl; tl != nil {
		tl.violation(u.w.now, 0)
	}
}

// noted keeps the faults injected, to explain acts.
func (u *userWorld) noted(who, text string) {
	u.notes = append(u.notes, note{at: u.w.now, who: who, text: text})
}

// applied: a write landed at the store.
func (u *userWorld) applied(name string, rec lease.Record) {
	// "::" marks tenure's own records (a standby's, a queue's, a group's
	// membership), which no program acts for.
	if rec.Released || strings.Contains(name, "::") || slices.Contains(u.held[rec.Holder], name) {
		return
	}
	u.held[rec.Holder] = append(u.held[rec.Holder], name)
}

// current returns name's record at the store now.
func (u *userWorld) current(name string) (rec lease.Record, written time.Duration, ok bool) {
	s := u.w.store
	if name == u.w.lease {
		return s.rec, s.writtenAt, s.exists
	}
	g := s.regs[name]
	if g == nil {
		return lease.Record{}, 0, false
	}
	return g.rec, g.written, g.exists
}

// take processes a staged act: the scheduler's hook for a pause between a
// check and an act fires first, so that a pause armed for it holds the act.
func (u *userWorld) take(in *instance, a *userAct) {
	w := u.w
	w.hook(hookCheck, in)
	w.at(w.now, in, func() { a.reply <- u.apply(in, &a.act) })
}

func (u *userWorld) apply(in *instance, a *userworld.Act) error {
	w := u.w
	a.At, a.Node, a.ID = w.now, in.node.Name, in.ID
	var err error
	switch a.Kind {
	case userworld.Effect:
		u.checkEffect(in, a)
	case userworld.Write:
		err = u.write(in, a)
	}
	u.acts = append(u.acts, *a)
	text := a.What
	switch {
	case a.Kind == userworld.Refused:
		text = fmt.Sprintf("write %q refused: %s", a.What, a.Err)
	case a.Kind == userworld.Write:
		text = fmt.Sprintf("write %q accepted, %v", a.What, a.Fence)
	case a.Fenced:
		text = fmt.Sprintf("%s (%v)", a.What, a.Fence)
	}
	w.trace(in, line{what: mAct, text: text})
	if w.tl != nil {
		w.tl.act(in.node, w.now, text)
	}
	return err
}

// checkEffect holds an unfenced effect to the store: a node acts as the
// holder of the lease its term's context names, or, without one, of every
// name it ever held (the world's lease if none), and another process must
// not hold any of them now.
func (u *userWorld) checkEffect(in *instance, a *userworld.Act) {
	names := u.held[in.ID]
	if a.Fenced {
		names = []string{a.Fence.Lease}
	} else if len(names) == 0 {
		names = []string{u.w.lease}
	}
	for _, name := range names {
		rec, written, ok := u.current(name)
		if !ok || rec.Released || rec.Holder == in.ID {
			continue
		}
		own := "it never held it"
		if a.Fenced {
			own = fmt.Sprintf("its term had token %d", a.Fence.Token)
		} else if slices.Contains(u.held[in.ID], name) {
			own = "it held it before"
		}
		if tl := u.w.tl; tl != nil {
			tl.write(in.node, u.w.now, wStale)
		}
		u.fail(in, fmt.Sprintf("%s acted (%q) while %s held %q (token %d, written at %s); %s%s",
			in.label, a.What, rec.Holder, name, rec.Token, clockTime(written), own, u.cause(in, rec)))
		return
	}
}

// cause lists the faults that touched the acting node or the holder since
// a lease before the holder's write: the pause or the skew that explains
// the overlap.
func (u *userWorld) cause(in *instance, rec lease.Record) string {
	from := u.w.now - 2*max(in.timing.LeaseDuration, rec.Duration)
	if in.resumedAt >= from {
		from = min(from, in.pausedAt) // the pause that made it a zombie
	}
	var parts []string
	for _, n := range u.notes {
		if n.at < from || n.who == "" && !strings.Contains(n.text, "record") {
			continue
		}
		if n.who == "" || strings.HasPrefix(n.who, in.node.Name) || strings.HasPrefix(n.who, rec.Holder) {
			who := n.who
			if who == "" {
				who = "the store"
			}
			parts = append(parts, fmt.Sprintf("%s: %s at %s", who, n.text, clockTime(n.at)))
		}
	}
	if in.node.spec.PPB != 0 || in.node.clk.wall != 0 {
		parts = append(parts, fmt.Sprintf("%s's clock: %s", in.node.Name, in.node.clockString(u.w.now)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; faults before it: " + strings.Join(parts, "; ")
}

// write is a write to the fenced resource, with fencing.Guard's rules; it
// also checks the history the guard leaves, so that a guard that let a
// stale token through would be caught.
func (u *userWorld) write(in *instance, a *userworld.Act) error {
	var err error
	switch {
	case u.spec.Unfenced && !a.Fenced:
		return nil // nothing to hold it to
	case u.spec.Unfenced:
	case !a.Fenced:
		err = fmt.Errorf("write %q: %w", a.What, fencing.ErrNoFence)
	default:
		err = u.guard.Do(a.Fence.Lease, a.Fence.Token, func() error { return nil })
	}
	if err != nil {
		a.Kind, a.Err = userworld.Refused, err.Error()
		if u.w.tl != nil {
			u.w.tl.write(in.node, u.w.now, wRefused)
		}
		return err
	}
	if h := u.highest[a.Fence.Lease]; a.Fence.Token < h {
		if u.w.tl != nil {
			u.w.tl.write(in.node, u.w.now, wStale)
		}
		u.fail(in, fmt.Sprintf("the resource accepted %s's write %q with token %d after token %d%s", in.label, a.What, a.Fence.Token, h, u.cause(in, lease.Record{})))
		return nil
	}
	u.highest[a.Fence.Lease] = a.Fence.Token
	return nil
}

// The script's controls (userworld.World).

func (u *userWorld) At(d time.Duration, f func()) { u.w.at(d, nil, f) }

// Now may be called from the program too: the real tier's goroutines read
// the time under the world's lock.
func (u *userWorld) Now() time.Duration {
	u.w.mu.Lock()
	defer u.w.mu.Unlock()
	return u.w.now
}

func (u *userWorld) Nodes() []string {
	var out []string
	for _, n := range u.w.nodes {
		out = append(out, n.Name)
	}
	return out
}

func (u *userWorld) node(name string) *node {
	for _, n := range u.w.nodes {
		if n.Name == name {
			return n
		}
	}
	panic(fmt.Sprintf("simtest: no node %q (the nodes are %v)", name, u.Nodes()))
}

// live returns the running process of node name, or nil.
func (u *userWorld) live(name string) *instance {
	if in := u.node(name).cur; in != nil && in.live() {
		return in
	}
	return nil
}

func (u *userWorld) Leader() string {
	if in := u.holder(); in != nil {
		return in.node.Name
	}
	return ""
}

// holder is the live process that holds the world's lease by the store:
// the leader the scenarios' faults aim at, whatever the program built
// (a Candidate, a Locker, a Group).
func (u *userWorld) holder() *instance {
	rec, _, ok := u.current(u.w.lease)
	if !ok || rec.Released {
		return nil
	}
	for _, in := range u.w.insts {
		if in.live() && in.ID == rec.Holder {
			return in
		}
	}
	return nil
}

func (u *userWorld) Pause(name string, d time.Duration, freeze bool) {
	if in := u.live(name); in != nil {
		u.w.pause(in, d, freeze)
	}
}

func (u *userWorld) PauseAtAct(name string, d time.Duration) {
	if in := u.live(name); in != nil {
		u.w.fault(in.label, "pause armed for the next act (%v)", d)
		u.w.arm(in, hookCheck, func() { u.w.pause(in, d, false) })
	}
}

func (u *userWorld) Crash(name string) {
	if in := u.live(name); in != nil {
		u.w.crash(in)
	}
}

func (u *userWorld) Restart(name string) {
	if u.live(name) == nil && !u.w.ending {
		u.w.restart(u.node(name), false)
	}
}

func (u *userWorld) Cut(name string, d time.Duration) {
	n := u.node(name)
	u.w.cutOff(n, true)
	u.w.at(u.w.now+d, nil, func() { u.w.cutOff(n, false) })
}

func (u *userWorld) StepWall(name string, d time.Duration) { u.w.stepWall(u.node(name), d) }
func (u *userWorld) LoseRecord()                           { u.w.loseRecord() }

// userProc is a process of a user's world: it runs the program.
type userProc struct {
	realProc
	u   *userWorld
	ctx context.Context
}

var _ userworld.Node = (*userProc)(nil)

func (p *userProc) start() {
	in := p.in
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.ctx = ctx
	go func() {
		s := ""
		defer func() {
			if v := recover(); v != nil {
				s = fmt.Sprintf("the program panicked: %v", v)
				p.Assert(true, false, s)
			}
			in.w.stage(item{in: in, src: srcRun, kind: itRunDone, s: s})
		}()
		p.u.spec.Program(p)
	}()
}

func (p *userProc) Name() string             { return p.in.node.Name }
func (p *userProc) Context() context.Context { return p.ctx }
func (p *userProc) Clock() tenure.Clock      { return realClock{p.in, srcCallbacks} }
func (p *userProc) Store() lease.Store       { return userStore{p.in} }

func (p *userProc) Runtime() tenure.Runtime {
	return tenure.Runtime{ID: p.in.ID, Clock: realClock{p.in, srcRunner}, Rand: p.in.w.machineRand(p.in)}
}

func (p *userProc) Act(a userworld.Act) error {
	in := p.in
	ua := &userAct{act: a, reply: make(chan error, 1)}
	in.w.stage(item{in: in, src: srcCallbacks, kind: itAct, act: ua})
	select {
	case err := <-ua.reply:
		return err
	case <-p.gone:
		return errors.New("the process is gone")
	}
}

func (p *userProc) Assert(always, cond bool, msg string) {
	w := p.in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	u := p.u
	switch {
	case !always:
		u.some[msg] = u.some[msg] || cond
	case !cond:
		u.fails = append(u.fails, fmt.Sprintf("at %s: %s: always: %s", clockTime(w.now), p.in.label, msg))
	}
}

// userStore is the store of a user's process: the real tier's, without the
// taps through which the simulator watches its own lock clients and group
// members, and with the observer that tells it the terms of the world's
// lease.
type userStore struct{ in *instance }

var (
	_ lease.StaleGetter = userStore{}
	_ seam.Observing    = userStore{}
)

func (s userStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return realStore(s).Get(ctx, name)
}

func (s userStore) GetStale(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	return realStore(s).GetStale(ctx, name)
}

func (s userStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	return realStore(s).Put(ctx, name, rec, expect)
}

func (userStore) OrderCalls() seam.CallOrders { return seam.CallOrders{} }
func (s userStore) WakeNet() seam.WakeNet     { return userNet(s) }

// ObserveTerms: the world's lease only, for a program may lead other
// leases too, which tenure's I1 does not compare.
func (s userStore) ObserveTerms(name string) seam.Observer {
	if name != s.in.w.lease {
		return nil
	}
	return termObserver(s)
}

// clockTime formats true time for a user's message.
func clockTime(d time.Duration) string { return d.Round(time.Millisecond).String() }

// userNet is simNet for a program's processes, which listen where tenure's
// defaults say: each publishes host:port with its ID as the host, by which
// the world delivers, whatever address it was given to listen on.
type userNet struct{ in *instance }

func (n userNet) Listen(addr, advertise string) (seam.WakeConn, string, error) {
	c, _, err := simNet(n).Listen(addr, advertise)
	if advertise == "" {
		advertise = net.JoinHostPort(n.in.ID, "1")
	}
	return c, advertise, err
}

func (n userNet) Send(addr string, msg []byte) error { return simNet(n).Send(addr, msg) }
