package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/seam"
	"github.com/tenure-go/tenure/lease"
)

// settleReal waits until every goroutine of the bubble is blocked on
// something only the scheduler can provide, processes what they staged,
// and reads the Status of the instances involved.
func (w *world) settleReal(in *instance) {
	synctest.Wait()
	w.flush()
	if in != nil {
		in.rt.poll()
		return
	}
	for _, o := range w.insts {
		o.rt.poll()
	}
}

// newRealProcess makes what runs an instance on the real tier: a
// tenure.Candidate, or in a lock scenario a lock client on tenure.Locker,
// or in a group scenario a tenure.Group.
func newRealProcess(in *instance) instRuntime {
	p := realProc{in: in, gone: make(chan struct{})}
	switch {
	case in.w.plan.Locks != nil:
		return newRealLocker(p)
	case in.w.plan.Group != nil:
		return newRealMember(p)
	}
	return &realRun{realProc: p}
}

// realProc is what every process of the real tier has.
type realProc struct {
	in   *instance
	conn *simConn         // its wake-up listener (guarded by world.mu); nil: none
	feed chan lease.Event // its Watch's events (guarded by world.mu); nil: none
	// gone is closed when the process crashes: a call of a goroutine that
	// does not end with its context (a leader's wake-up of its standby, a
	// lock's release) returns, cut off from the world.
	gone   chan struct{}
	dead   bool               // crashed (guarded by world.mu)
	cancel context.CancelFunc // ends the process's context: Run's, or its program's
}

func (p *realProc) proc() *realProc { return p }

func (p *realProc) stop() { p.cancel() }

// crash: the process's goroutines wind down cut off from the world.
func (p *realProc) crash() {
	p.in.w.mu.Lock()
	p.dead = true
	p.in.w.mu.Unlock()
	close(p.gone)
	p.cancel()
}

// hold takes the world's lock, for a tap, and reports whether the process
// is alive: a dead one's goroutines wind down unseen. release lets go.
func (p *realProc) hold() bool {
	p.in.w.mu.Lock()
	return !p.dead
}

func (p *realProc) release() { p.in.w.mu.Unlock() }

func (p *realProc) observed() election.Leader { return election.Leader{} }
func (p *realProc) poll()                     {}

// realProcess is a process of the real tier.
type realProcess interface{ proc() *realProc }

func (p *realProc) fire(tm *timer) {
	select {
	case tm.ch <- p.in.local():
	default:
	}
}

func (p *realProc) deliver(req *request) {
	select {
	case req.ch <- req.res:
	default:
	}
}

// hear takes a message of the wake-up network.
func (p *realProc) hear(msg string) {
	w := p.in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := p.conn; c != nil && !c.closed {
		select {
		case c.ch <- msg:
		default: // the socket's buffer is full
		}
	}
}

// realRun is an instance of the real tier: a tenure.Candidate.
type realRun struct {
	realProc
	c    *tenure.Candidate
	inCb atomic.Int32 // callbacks running: more than one breaks I4

	// The context of the latest OnElected (guarded by world.mu).
	ctx    context.Context
	ctxTok uint64

	priority int // Config.Priority
}

func (r *realRun) start() {
	in := r.in
	w := in.w
	var store lease.Store = realStore{in}
	if w.plan.Feed != nil {
		store = feedStore{realStore{in}}
	}
	if w.clockTokens() {
		store = lossyStore{store}
	}
	cfg := tenure.Config{
		Lease: leaseName, Store: store, Callbacks: r.callbacks(), Timing: in.timing,
		Runtime:     tenure.Runtime{ID: in.ID, Clock: realClock{in, srcRunner}, Rand: w.machineRand(in)},
		StrongPolls: !w.plan.StaleReads,
	}
	if in.timing.ColdPollInterval > 0 {
		spec := in.node.spec
		cfg.Standby, cfg.Priority, cfg.PriorityHoldOff = true, spec.Priority, spec.PriorityHoldOff
		r.priority = spec.Priority
		cfg.WakeAddr = tenure.NoWake
		if w.plan.Wake != nil {
			cfg.WakeAddr = net.JoinHostPort(in.ID, "1") // simNet publishes the ID, as the fast tier does
		}
	}
	c, err := tenure.New(cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: %s: %v", in.label, err)) // the config passed Validate before
	}
	seam.Observe(c, termObserver{in})
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	// Owned by the world: it waits for every instance's itRunDone.
	go func() {
		s := ""
		if err := c.Run(ctx); err != nil {
			s = err.Error()
			if errors.Is(err, tenure.ErrReleaseUnconfirmed) {
				s = "release not confirmed"
			}
		}
		w.stage(item{in: in, src: srcRun, kind: itRunDone, s: s})
	}()
}

func (r *realRun) hotStandby() bool {
	return r.c != nil && r.in.live() && r.c.Status().Standby
}

func (r *realRun) prio() int { return r.priority }

func (r *realRun) observed() election.Leader {
	st := r.c.Status()
	return election.Leader{Holder: st.Leader.Holder, Token: st.Leader.Token}
}

// poll reads the deadline the checker holds the term to (I4), and checks
// that a term the loop ended has its context cancelled.
func (r *realRun) poll() {
	in := r.in
	if !in.live() || r.c == nil {
		return
	}
	w := in.w
	if st := r.c.Status(); st.Leading {
		in.deadline = st.Deadline
		if t := w.chk.open[in]; t == nil || t.tok != uint64(st.Token) {
			// The terms come from the Candidate's observer (termObserver).
			w.chk.violate(Callbacks, in, fmt.Sprintf("%s: Status leads with token %d, but no term began: the simulator's observer missed it", in.label, st.Token))
		}
	}
	w.mu.Lock()
	ctx, tok := r.ctx, r.ctxTok
	w.mu.Unlock()
	// Whether the context was cancelled, without asking it to check its
	// deadline: ctx.Err() (and context.Cause, which calls it) could cancel
	// it now, waking the callback goroutine of a paused process.
	if ctx == nil || ctx.Value(seam.TermCancelled{}).(func() bool)() {
		return
	}
	if t := w.chk.open[in]; t == nil || t.tok != tok {
		w.chk.violate(Callbacks, in, fmt.Sprintf("%s: term %d ended but its context is alive", in.label, tok))
		w.mu.Lock()
		r.ctx = nil
		w.mu.Unlock()
	}
}

func (r *realRun) enter() {
	if r.inCb.Add(1) != 1 {
		r.in.w.stage(item{in: r.in, src: srcCallbacks, kind: itViolation, inv: Callbacks, s: r.in.label + ": callbacks overlap"})
	}
}

func (r *realRun) leave() { r.inCb.Add(-1) }

// callbacks are the sim's program: the leader checks its term's context,
// then acts (a write to the resource) a moment later, in a loop; every
// callback may be slow (Plan.Slow). fastRun runs exactly this, as the
// glue's queues hand the callbacks out.
func (r *realRun) callbacks() tenure.Callbacks {
	in := r.in
	w := in.w
	clk := realClock{in, srcCallbacks}
	note := func(it item) {
		it.in, it.src = in, srcCallbacks
		w.stage(it)
	}
	return tenure.Callbacks{
		OnElected: func(ctx context.Context, term tenure.Term) {
			r.enter()
			defer r.leave()
			tok := uint64(term.Token)
			w.mu.Lock()
			r.ctx, r.ctxTok = ctx, tok
			w.mu.Unlock()
			note(item{kind: itCbElected, tok: tok})
			for {
				select {
				case <-ctx.Done():
				case <-clk.After(w.plan.Work):
				}
				if ctx.Err() != nil {
					break
				}
				note(item{kind: itCheck, tok: tok})
				<-clk.After(w.plan.Act) // a pause here makes a zombie write
				note(item{kind: itWrite, tok: tok})
			}
			if d := in.slow(slowCleanup); d > 0 {
				<-clk.After(d)
			}
			note(item{kind: itCbReturn})
		},
		OnDemoted: func(term tenure.Term, reason tenure.DemotionReason) {
			r.enter()
			defer r.leave()
			w.mu.Lock()
			ctx := r.ctx
			w.mu.Unlock()
			note(item{kind: itCbDemoted, tok: uint64(term.Token), s: reason.String(), flag: ctx != nil && ctx.Err() != nil})
			if d := in.slow(slowDemoted); d > 0 {
				<-clk.After(d)
			}
			note(item{kind: itCbDemotedDone})
		},
		OnLeaderChange: func(l tenure.Leader) {
			// On a goroutine of its own: it may overlap the others.
			w.stage(item{in: in, src: srcLeader, kind: itCbLeader, tok: uint64(l.Token), s: l.Holder})
			if d := in.slow(slowLeader); d > 0 {
				<-realClock{in, srcLeader}.After(d)
			}
		},
	}
}

// realClock is the tenure.Clock of an instance: Now is the node's
// monotonic reading (drifting, offset; wall-clock steps do not touch it,
// just as they do not touch the monotonic part of time.Now), and After
// stages a timer that the scheduler fires by that reading.
type realClock struct {
	in  *instance
	src source
}

func (c realClock) Now() time.Time {
	w := c.in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	return c.in.local()
}

// Wall is the node's wall clock, which the Candidate reads to mint the
// token of a record it creates.
func (c realClock) Wall() time.Time {
	w := c.in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	return c.in.wallNow()
}

func (c realClock) After(d time.Duration) <-chan time.Time {
	w := c.in.w
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	tm := &timer{in: c.in, target: c.in.node.clk.mono(w.now) + max(d, 0), ch: ch}
	w.mu.Unlock()
	w.stage(item{in: c.in, src: c.src, kind: itTimer, tm: tm})
	return ch
}

// realStore is the lease.Store of an instance: a call is staged for the
// scheduler, which sends it over the simulated link; the call returns when
// the answer arrives, or when its context is done (the request may still
// land: that is a delayed write).
// heard takes an event of the store's change feed (Plan.Feed), for the
// Candidate's Watch.
func (p *realProc) heard(ev lease.Event) {
	w := p.in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.feed != nil {
		select {
		case p.feed <- ev:
		default: // it lags
		}
	}
}

// feedStore is realStore with the world's change feed (Plan.Feed).
type feedStore struct{ realStore }

var _ lease.Watcher = feedStore{}

// Watch takes the events the world delivers to the process (world.feed).
func (s feedStore) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	if name != s.in.w.lease {
		// The world's feed tells of its lease only (not of the standby
		// record, which the fast tier's leaders poll): as a store whose
		// feed does not serve that name.
		return errors.New("the simulated feed tells of " + s.in.w.lease + " only")
	}
	p := s.in.rt.(realProcess).proc()
	ch := make(chan lease.Event, 64)
	w := s.in.w
	w.mu.Lock()
	p.feed = ch
	w.mu.Unlock()
	fn(lease.Event{})
	for {
		select {
		case ev := <-ch:
			fn(ev)
		case <-ctx.Done():
			return ctx.Err()
		case <-p.gone:
			return errors.New("the process is gone")
		}
	}
}

type realStore struct{ in *instance }

// lossyStore is the sim's store as a Lossy one (Plan.Lossy): tenure mints
// every takeover's token from the wall clock on it.
type lossyStore struct{ lease.Store }

func (lossyStore) Lossy() bool { return true }

// storeOf is in's store for a Locker or a Group of the real tier: a
// Lossy one on a Lossy plan.
func (w *world) storeOf(in *instance) lease.Store {
	if w.clockTokens() {
		return lossyStore{realStore{in}}
	}
	return realStore{in}
}

var _ lease.Store = realStore{}

func (s realStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	rep := s.call(ctx, name, election.OpGet, lease.Record{}, lease.NoVersion)
	return rep.rec, rep.ver, rep.err
}

func (s realStore) GetStale(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	rep := s.callStale(ctx, name, election.OpGet, lease.Record{}, lease.NoVersion, true)
	return rep.rec, rep.ver, rep.err
}

func (s realStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	rep := s.call(ctx, name, election.OpPut, rec, expect)
	return rep.ver, rep.err
}

func (s realStore) call(ctx context.Context, name string, kind election.OpKind, rec lease.Record, expect lease.Version) reply {
	return s.callStale(ctx, name, kind, rec, expect, false)
}

func (s realStore) callStale(ctx context.Context, name string, kind election.OpKind, rec lease.Record, expect lease.Version, stale bool) reply {
	// Staged even if ctx is done already: whether the goroutine ran before
	// or after the cancel is the runtime's choice, and the fast tier stages
	// every call it starts.
	w := s.in.w
	req := &request{in: s.in, kind: kind, rec: rec.Clone(), expect: expect, stale: stale, ch: make(chan reply, 1)}
	if name != w.lease { // the standby's record, a lock's
		w.mu.Lock()
		req.reg = w.store.register(name)
		w.mu.Unlock()
	}
	it := item{in: s.in, src: srcOf(req.reg, w.store), kind: itRequest, req: req}
	switch n, ok := seam.CallOrderOf(ctx); {
	case seam.IsWakeRead(ctx):
		it.src = srcWake // the goroutine that then sends the wake-up
		w.stage(it)
	case ok:
		// A call of the Candidate's host, on a goroutine of its own: in
		// the order the host made them, as the fast tier stages them.
		w.stageOrdered(it, n)
	default:
		w.stage(it)
	}
	select {
	case rep := <-req.ch:
		return rep
	case <-s.in.rt.(realProcess).proc().gone:
		return reply{err: fmt.Errorf("%v lease %q: the process is gone", kind, name)}
	case <-ctx.Done():
		w.mu.Lock()
		req.abandoned = true
		w.mu.Unlock()
		return reply{err: fmt.Errorf("%v %q: %w", kind, name, ctx.Err())}
	}
}

// OrderCalls: the host marks each call with its order (seam.CallOrder).
func (realStore) OrderCalls() seam.CallOrders { return seam.CallOrders{} }

// WakeNet: an instance's wake-ups travel on the world's wake-up network
// (Plan.Wake), its faults and all.
func (s realStore) WakeNet() seam.WakeNet { return simNet(s) }

// simNet is an instance's seam.WakeNet: a message it sends is staged, and
// the world delivers it (world.sendMsg) to the listener of the instance
// whose ID it is sent to.
type simNet struct{ in *instance }

// Listen publishes the instance's ID, as the fast tier does, or advertise
// where it is set.
func (n simNet) Listen(addr, advertise string) (seam.WakeConn, string, error) {
	c := &simConn{in: n.in, ch: make(chan string, 64)}
	w := n.in.w
	w.mu.Lock()
	n.in.rt.(realProcess).proc().conn = c
	w.mu.Unlock()
	if advertise != "" {
		return c, advertise, nil
	}
	return c, n.in.ID, nil
}

// hostOf is the ID of the instance addr names: its host, where it has a
// port.
func hostOf(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// Send: the leader's wake-up of its standby, on a goroutine of its own.
func (n simNet) Send(addr string, msg []byte) error {
	n.in.w.stage(item{in: n.in, src: srcWake, kind: itWake, s: hostOf(addr), msg: string(msg)})
	return nil
}

// simConn is a wake-up listener on the world's network.
type simConn struct {
	in     *instance
	ch     chan string
	closed bool // guarded by world.mu
}

// Recv returns the messages delivered before Close, then an error.
func (c *simConn) Recv(buf []byte) (int, error) {
	msg, ok := <-c.ch
	if !ok {
		return 0, net.ErrClosed
	}
	return copy(buf, msg), nil
}

// Send: the listener's sender goroutine.
func (c *simConn) Send(addr string, msg []byte) error {
	c.in.w.stage(item{in: c.in, src: srcSend, kind: itWake, s: hostOf(addr), msg: string(msg)})
	return nil
}

func (c *simConn) Close() error {
	w := c.in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.ch)
	}
	return nil
}

func (c *simConn) Addr() string { return c.in.ID }

// termObserver learns from the Candidate's loop, through internal/seam, the
// exact moments a term begins and its context is cancelled, which I1
// measures.
type termObserver struct{ in *instance }

func (o termObserver) Elected(t election.Term) {
	o.in.w.stage(item{in: o.in, src: srcRunner, kind: itElected, tok: uint64(t.Token)})
}

func (o termObserver) Demoted(t election.Term, r election.Reason) {
	o.in.w.stage(item{in: o.in, src: srcRunner, kind: itDemoted, tok: uint64(t.Token), s: r.String()})
}

func (o termObserver) HandOver() {
	o.in.w.stage(item{in: o.in, src: srcRunner, kind: itHandOver})
}

func (o termObserver) Woken() {
	o.in.w.stage(item{in: o.in, src: srcRunner, kind: itWoken})
}

// goroutines maps the IDs of a synctest bubble's goroutines to their stacks.
type goroutines map[int]string

// bubble lists the goroutines in the caller's synctest bubble, but the caller.
func bubble() goroutines {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	blocks := strings.Split(string(buf), "\n\n")
	mine := bubbleOf(blocks[0]) // the first is the caller
	out := goroutines{}
	for _, b := range blocks[1:] {
		if id, ok := goroutineID(b); ok && mine != "" && bubbleOf(b) == mine {
			out[id] = b
		}
	}
	return out
}

func (g goroutines) since(before goroutines) []string {
	var ids []int
	for id := range g {
		if _, ok := before[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids {
		out = append(out, g[id])
	}
	return out
}

func bubbleOf(block string) string {
	header, _, _ := strings.Cut(block, "\n")
	_, after, ok := strings.Cut(header, "synctest bubble ")
	if !ok {
		return ""
	}
	return strings.TrimRightFunc(after, func(r rune) bool { return r < '0' || r > '9' })
}

func goroutineID(block string) (int, bool) {
	rest, ok := strings.CutPrefix(block, "goroutine ")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	id, err := strconv.Atoi(num)
	return id, err == nil
}
