package sim

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Staging: what an instance's goroutines (or their fast-tier model) do
// between two events is staged, then processed in a canonical order, so
// that both tiers replay alike; timers, on each node's clock; the trace.

// source says which goroutine of an instance staged an item. Within one
// phase (the processing of one event) each source is a single goroutine,
// so sorting staged items by (instance, source, count) gives one order
// however the runtime interleaved the goroutines.
type source uint8

const (
	srcRunner    source = iota // the Candidate's loop: its timers and its term log
	srcStore                   // store calls
	srcStandby                 // store calls on the standby record: a goroutine of their own beside the lease's
	srcCallbacks               // the callback goroutine: callbacks and the leader's work
	srcLeader                  // the goroutine that delivers OnLeaderChange
	srcRun                     // the goroutine that called Run
	srcSend                    // real tier: the goroutine that sends a listener's wake-ups and notices
	srcWake                    // a leader's goroutine that wakes its standby: its read of the standby record, its wake-up
	nsrc
)

type itemKind uint8

const (
	itTimer         itemKind = iota + 1 // tm: a timer to schedule
	itRequest                           // req: a store call to send
	itElected                           // tok: the loop began a term
	itDemoted                           // tok, s (reason), deadline (fast tier): the loop ended it
	itCbElected                         // tok: OnElected began
	itCbReturn                          // OnElected returned
	itCbDemoted                         // tok, s (reason), flag (the term's context was done)
	itCbDemotedDone                     // OnDemoted returned
	itCbLeader                          // tok, s (holder)
	itCheck                             // tok: the leader checked its context before acting
	itWrite                             // tok: the leader wrote to the resource
	itRunDone                           // s: Run's error
	itViolation                         // inv, s
	itWake                              // real tier: s, msg: a wake-up or a notice to send to the instance with ID s
	itWoken                             // real tier: the loop took a wake-up
	itHandOver                          // real tier: the leader hands the lease over
	itAct                               // act: an act of a user's code (simtest)
)

type item struct {
	in       *instance
	src      source
	n        uint64
	kind     itemKind
	tok      uint64
	s        string
	flag     bool
	inv      Invariant
	deadline time.Time
	tm       *timer
	req      *request
	msg      string
	act      *userAct
}

type timer struct {
	in     *instance
	id     uint64        // order of scheduling, to reschedule deterministically
	target time.Duration // monotonic reading at which it fires
	slot   int           // index in node.timers, -1 when not there
	fire   func()        // fast tier; nil for the runner's wake-up (fastRun.wakeUp)
	ch     chan time.Time
	dead   bool // fast tier: nobody waits for it any more
}

// stage records an item from an instance's goroutine (or its fast-tier
// model); flush processes the phase's items in canonical order.
func (w *world) stage(it item) {
	if w.shared { // the fast tier runs on one goroutine
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	it.n = it.in.n[it.src]
	it.in.n[it.src]++
	switch {
	case it.kind == itElected:
		it.in.inTerm = true
	case it.kind == itCbDemotedDone:
		it.in.inTerm = false
	case it.kind == itRequest && it.req.rec.Released:
		it.req.early = it.in.inTerm
	}
	w.staged = append(w.staged, it)
}

// stageOrdered stages it in the order n among the items of its source,
// rather than in the order it is staged: a real-tier host's calls, each
// staged by a goroutine of its own.
func (w *world) stageOrdered(it item, n uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	it.n = n
	w.staged = append(w.staged, it)
}

func (w *world) flush() {
	if w.shared {
		w.mu.Lock()
	}
	items := w.staged
	w.staged = w.spare[:0]
	if w.shared {
		w.mu.Unlock()
	}
	// Insertion sort: a phase stages a handful of items.
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && itemLess(&items[j], &items[j-1]); j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
	for i := range items {
		w.process(&items[i])
		items[i] = item{}
	}
	w.spare = items[:0]
}

func itemLess(a, b *item) bool {
	if a.in.num != b.in.num {
		return a.in.num < b.in.num
	}
	if a.src != b.src {
		return a.src < b.src
	}
	return a.n < b.n
}

func (w *world) process(it *item) {
	in := it.in
	switch it.kind {
	case itTimer:
		w.schedule(it.tm)
		return
	case itRunDone:
		in.finished = true
		w.running--
		if !in.crashed {
			w.trace(in, line{what: mRunDone, text: it.s})
		}
		if w.tl != nil && in == in.node.cur {
			w.tl.down(in.node, w.now)
		}
		return
	}
	if in.crashed {
		return // a dead process's goroutines wind down unseen (real tier)
	}
	switch it.kind {
	case itRequest:
		w.store.send(it.req)
		w.owed(in)
	case itElected:
		w.chk.elected(in, it.tok)
	case itDemoted:
		if !it.deadline.IsZero() {
			in.deadline = it.deadline
		}
		w.chk.demoted(in, it.tok, it.s)
	case itCbElected:
		w.chk.cbElected(in, it.tok)
	case itCbReturn:
		w.chk.cbReturned(in)
	case itCbDemoted:
		w.chk.cbDemoted(in, it.tok, it.s, it.flag)
	case itCbDemotedDone:
		w.chk.cbDemotedDone(in)
	case itCbLeader:
		w.trace(in, line{what: mOnLeader, tok: int64(it.tok), holder: it.s})
	case itCheck:
		w.trace(in, line{what: mCheck, tok: int64(it.tok)})
		w.hook(hookCheck, in)
	case itWrite:
		w.res.write(in, it.tok)
	case itViolation:
		w.chk.violate(it.inv, in, it.s)
	case itWake:
		w.sendMsg(in, it.s, it.msg)
	case itHandOver:
		w.handingOver(in)
	case itAct:
		w.user.take(in, it.act)
	case itWoken:
		w.chk.stats.WakesUsed++
		w.trace(in, line{what: mFault, text: "woken: reading the lease"})
	}
}

// newTimer returns a timer of in that fires when in's monotonic clock has
// measured d from now. It is staged, so it is scheduled in canonical order.
func (w *world) newTimer(in *instance, src source, d time.Duration) *timer {
	tm := &timer{in: in, target: in.node.clk.mono(w.now) + max(d, 0)}
	w.stage(item{in: in, src: src, kind: itTimer, tm: tm})
	return tm
}

// owed lets a fast-tier process set the timer it put off, once one of its
// call's events has run (hostTimer).
func (w *world) owed(in *instance) {
	if in.ht != nil && in.ht.owed {
		in.rt.(owing).settleOwed()
	}
}

func (w *world) schedule(tm *timer) {
	w.timerID++
	tm.id = w.timerID
	n := tm.in.node
	tm.slot = len(n.timers)
	n.timers = append(n.timers, tm)
	w.pushTimer(tm)
}

func (w *world) pushTimer(tm *timer) {
	n := tm.in.node
	if at := n.clk.trueAt(w.now, tm.target); at != never {
		w.push(event{at: at, kind: evTimer, tm: tm, epoch: n.epoch})
	}
}

// unlist removes tm from n.timers, if there.
func (n *node) unlist(tm *timer) {
	i := tm.slot
	if i < 0 || i >= len(n.timers) || n.timers[i] != tm {
		return
	}
	last := n.timers[len(n.timers)-1]
	n.timers[i], last.slot = last, i
	n.timers[len(n.timers)-1] = nil
	n.timers = n.timers[:len(n.timers)-1]
	tm.slot = -1
}

// setRate changes n's clock rate from now on and reschedules its timers,
// which fire by its monotonic readings.
func (w *world) setRate(n *node, ppb int64) {
	n.clk.setRate(w.now, ppb)
	n.epoch++
	ts := slices.Clone(n.timers)
	slices.SortFunc(ts, func(a, b *timer) int { return cmp.Compare(a.id, b.id) })
	for _, tm := range ts {
		w.pushTimer(tm)
	}
}

func (w *world) trace(in *instance, l line) {
	who := ""
	if in != nil {
		who = in.label
	}
	w.tr.add(w.now, who, l)
}

func (w *world) fault(who, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if w.user != nil {
		w.user.noted(who, text)
	}
	w.tr.add(w.now, who, line{what: mFault, text: text})
}
