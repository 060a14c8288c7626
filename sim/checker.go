package sim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/internal/standby"
)

// maxKept bounds the violations a Result keeps verbatim; all are counted.
const maxKept = 20

// runStats count what happened in a run, for tests that a scenario did what
// it claims and for the summary.
type runStats struct {
	Terms         int // terms begun
	Pauses        int // process pauses and VM suspends
	Crashes       int
	Requests      int // store calls sent
	Dropped       int // requests lost in a partition
	Errors        int // requests refused by the store
	Lost          int // writes applied whose answer was lost
	Delayed       int // writes that landed after their writer gave up
	Conflicts     int
	Releases      int           // released records written
	Accepted      int           // writes the resource accepted
	Refused       int           // writes the fenced resource refused
	StaleAccepted int           // writes accepted with a stale token (I3 violations)
	MaxFailover   time.Duration // longest wait for a new leader in an I5 check
	Losses        int           // records deleted or written back
	LossDemotions int           // terms that ended because of one

	// With a standby: calls on the standby record, and wake-ups sent,
	// lost, and taken (that made the standby read).
	StandbyRequests                 int
	WakesSent, WakesLost, WakesUsed int
	// Renewal notices sent, lost and forged (and lock wake-ups forged);
	// the hot standby's reads of
	// the lease, its time hot and how many times it turned hot.
	NoticesSent, NoticesLost, NoticesForged int
	HotReads, HotStints                     int
	HotTime                                 time.Duration
	// I5 checks made with the cold bound (no standby reading) and with
	// the wake-up bound.
	ColdBounds, WakeBounds int
	// I5 checks made with the notice bound (noticeBound).
	NoticeBounds int
	// Events of the store's change feed (Plan.Feed) sent and lost, and
	// I5 checks made with the feed bound (feedBound).
	FeedEvents, FeedLost, FeedBounds int
	// I5 checks made with the lock handoff bound (lockHandoffBound).
	LockWakeBounds int
	// SemFull counts grants of a semaphore's last free slot: its every
	// slot then held in belief.
	SemFull int
	// Hand-overs to a candidate of higher priority (Config.Priority), and
	// the checks that the highest priority leads (expectPreferred).
	Handovers, PreferredChecks int
	StaleReads                 int // reads served stale
	GroupChecks                int // group scenarios: balance checks made
	GroupBounds                int // and shards held again, held to a bound
	Anomalies                  int // fast tier: anomalies the Candidates reported (lost records, duplicate IDs)
}

// term is one leadership term, or one hold of a lock, as the checker saw
// it, in true time.
type term struct {
	in         *instance
	tok        uint64
	start, end time.Duration // end is -1 while the term is open
	lock       string        // the lock held (a semaphore's slot); "": the lease
	sem        string        // the semaphore whose slot it is; "": none
	semN       int           // the number of slots its holder asked for
	deadline   time.Time     // a lock's: its holder believes until then on its clock; zero: until it ends
}

// cbState follows an instance's callbacks for I4.
type cbState struct {
	open     bool // OnElected called, OnDemoted not yet
	returned bool // that OnElected returned
	demoting bool // OnDemoted called, not yet returned
	tok      uint64
}

type checker struct {
	w      *world
	req    Set
	viol   []Violation
	counts [numInvariants + 1]int
	open   map[*instance]*term
	terms  []*term
	maxTok uint64
	holder map[uint64]string // token → instance label of its term
	stats  runStats

	convAt      time.Duration // -1 until converged
	convTo      *term
	convPending bool // a convergence check is due

	lockTok map[string]uint64 // highest token granted, per lock (and group shard)
	waiting []*lockClient     // lock calls not yet answered

	gopen                    map[*instance]map[string]*term // group members' open holds, by shard
	gfree                    map[string]shardFree           // shards not held, since when
	gjoined                  time.Duration                  // when a group member last started
	gcrashed                 time.Duration                  // and last crashed
	gstarts, gstops, ggrants int                            // group members started and stopped, shards granted
}

func newChecker(w *world, req Set) *checker {
	return &checker{w: w, req: req, open: make(map[*instance]*term), holder: make(map[uint64]string), convAt: -1, lockTok: map[string]uint64{}, gopen: map[*instance]map[string]*term{}, gfree: map[string]shardFree{}}
}

func (c *checker) violate(inv Invariant, in *instance, msg string) {
	c.counts[inv]++
	if len(c.viol) < maxKept {
		c.viol = append(c.viol, Violation{Inv: inv, At: c.w.now, Msg: msg})
	}
	c.w.trace(in, line{what: mViolation, code: int64(inv), text: msg})
	if tl := c.w.tl; tl != nil {
		tl.violation(c.w.now, inv)
	}
}

// elected: in's loop began a term with token tok. I1, I2.
func (c *checker) elected(in *instance, tok uint64) {
	w := c.w
	w.trace(in, line{what: mElected, tok: int64(tok)})
	if t := c.open[in]; t != nil {
		c.violate(Callbacks, in, fmt.Sprintf("%s elected with token %d while its term %d is open", in.label, tok, t.tok))
	}
	for _, other := range w.insts {
		if o := c.open[other]; o != nil && other != in {
			c.violate(OneLeader, in, fmt.Sprintf("%s elected with token %d while %s (token %d, since %s) acts as leader",
				in.label, tok, other.label, o.tok, fmtTime(o.start)))
		}
	}
	if h, ok := c.holder[tok]; ok {
		c.violate(Tokens, in, fmt.Sprintf("token %d begins a second term (%s, after %s)", tok, in.label, h))
	} else if tok <= c.maxTok {
		c.violate(Tokens, in, fmt.Sprintf("token %d of %s is not above token %d of an earlier term", tok, in.label, c.maxTok))
	}
	c.holder[tok] = in.label
	c.maxTok = max(c.maxTok, tok)
	t := &term{in: in, tok: tok, start: w.now, end: -1}
	c.open[in] = t
	c.terms = append(c.terms, t)
	c.stats.Terms++
	in.deadline = time.Time{}
	c.changed(in)
}

// demoted: in's loop ended its term and cancelled the term's context.
func (c *checker) demoted(in *instance, tok uint64, reason string) {
	w := c.w
	w.trace(in, line{what: mDemoted, tok: int64(tok), text: reason})
	t := c.open[in]
	if t == nil || t.tok != tok {
		c.violate(Callbacks, in, fmt.Sprintf("%s demoted from token %d without such a term", in.label, tok))
		return
	}
	c.reasonFits(in, t, reason)
	if reason == tenure.ReasonRecordLost.String() {
		c.stats.LossDemotions++
	}
	c.end(t)
	// Late only if the clock had reached the deadline at an earlier instant:
	// a clock running fast skips readings, so the first one at or past the
	// deadline may lie past it. A process that was paused acts on resuming.
	if !in.deadline.IsZero() && in.resumedAt != w.now && !in.prevLocal().Before(in.deadline) {
		c.violate(Callbacks, in, fmt.Sprintf("%s: term %d's context cancelled at local %s, after its deadline %s",
			in.label, tok, in.local().Format(time.TimeOnly+".000000000"), in.deadline.Format(time.TimeOnly+".000000000")))
	}
	c.changed(in)
}

func (c *checker) end(t *term) {
	t.end = c.w.now
	delete(c.open, t.in)
	if tl := c.w.tl; tl != nil {
		tl.term(t)
	}
}

// crashed: a dead process acts no more.
func (c *checker) crashed(in *instance) {
	c.stats.Crashes++
	c.waiting = slices.DeleteFunc(c.waiting, func(l *lockClient) bool { return l.in == in })
	if t := c.open[in]; t != nil {
		c.end(t)
		c.changed(in)
	}
	if c.w.plan.Group != nil {
		c.gcrashed = c.w.now
	}
	c.endShards(in, true)
}

func (c *checker) cbElected(in *instance, tok uint64) {
	c.w.trace(in, line{what: mOnElected, tok: int64(tok)})
	if in.cb.open {
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnElected(%d) before OnDemoted(%d)", in.label, tok, in.cb.tok))
	}
	in.cb = cbState{open: true, tok: tok}
}

func (c *checker) cbReturned(in *instance) {
	c.w.trace(in, line{what: mReturned})
	if !in.cb.open || in.cb.returned {
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnElected returned twice or out of turn", in.label))
	}
	in.cb.returned = true
}

func (c *checker) cbDemoted(in *instance, tok uint64, reason string, ctxDone bool) {
	c.w.trace(in, line{what: mOnDemoted, tok: int64(tok), text: reason})
	switch {
	case !in.cb.open:
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnDemoted(%d) without OnElected", in.label, tok))
	case !in.cb.returned:
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnDemoted(%d) before OnElected returned", in.label, tok))
	case in.cb.tok != tok:
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnDemoted(%d) after OnElected(%d)", in.label, tok, in.cb.tok))
	}
	if !ctxDone {
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnDemoted(%d) before the term's context was cancelled", in.label, tok))
	}
	in.cb = cbState{demoting: true, tok: tok}
}

func (c *checker) cbDemotedDone(in *instance) {
	c.w.trace(in, line{what: mDemotedDone})
	if !in.cb.demoting {
		c.violate(Callbacks, in, fmt.Sprintf("%s: OnDemoted returned out of turn", in.label))
	}
	in.cb = cbState{}
}

// reasonFits checks that the reason a term ended matches what happened
// (I4): a shutdown was asked for, another holder minted a higher token, the
// record was lost or written back during the term, or the local clock
// reached the deadline.
func (c *checker) reasonFits(in *instance, t *term, reason string) {
	s := c.w.store
	var why string
	switch reason {
	case tenure.ReasonShutDown.String():
		if !in.stopped {
			why = "but nothing stopped it"
		}
	case tenure.ReasonLost.String():
		if s.maxEver <= t.tok {
			why = fmt.Sprintf("but no later token than %d was stored", t.tok)
		}
	case tenure.ReasonRecordLost.String():
		if s.lostAt < t.start {
			why = "but the record was neither deleted nor written back during the term"
		}
	case tenure.ReasonHandedOver.String():
		// The standby record it read names a higher priority; the record
		// outlives its holder's crash by a standby lease, far longer than
		// the read took.
		_, p := standby.Parse(s.sb.rec.Payload)
		if f, ok := in.rt.(candidate); !ok || !s.sb.exists || s.sb.rec.Released || p <= f.prio() {
			why = "but the standby record names no higher priority"
		}
	case tenure.ReasonExpired.String(), tenure.ReasonStoreUnavailable.String():
		if !in.deadline.IsZero() && in.local().Before(in.deadline) {
			why = fmt.Sprintf("but its deadline %s is still ahead", in.deadline.Format(time.TimeOnly+".000000000"))
		}
	default:
		why = "which nothing in the simulator causes"
	}
	if why != "" {
		c.violate(Callbacks, in, fmt.Sprintf("%s: term %d ended with reason %q, %s", in.label, t.tok, reason, why))
	}
}

// leaderSince is an I5 check: a term must have begun in [from, from+d].
func (c *checker) leaderSince(from, d time.Duration, why string) {
	for _, t := range c.terms {
		if t.start >= from && t.start <= from+d {
			c.stats.MaxFailover = max(c.stats.MaxFailover, t.start-from)
			return
		}
	}
	c.violate(Liveness, nil, fmt.Sprintf("no leader within %v of %s (%s)", d, fmtTime(from), why))
}

// converged is I5's check after heal: exactly one leader now, kept until
// the shutdown (changed and beforeShutdown).
func (c *checker) converged() {
	if !c.convPending {
		return
	}
	c.convPending = false
	var leaders []*term
	for _, in := range c.w.insts {
		if t := c.open[in]; t != nil && in.live() {
			leaders = append(leaders, t)
		}
	}
	if len(leaders) != 1 {
		c.violate(Liveness, nil, fmt.Sprintf("%d leaders after the faults healed", len(leaders)))
		return
	}
	c.convAt, c.convTo = c.w.now, leaders[0]
}

// changed: a term began or ended; after convergence that breaks I5.
func (c *checker) changed(in *instance) {
	if c.convAt >= 0 && !c.w.ending {
		c.violate(Liveness, in, fmt.Sprintf("leadership changed (%s) after it converged at %s", in.label, fmtTime(c.convAt)))
		c.convAt = -1
	}
}

func (c *checker) beforeShutdown() {
	if c.convPending {
		c.violate(Liveness, nil, "the run ends before the convergence check: the scenario heals too late")
		c.convPending = false
	}
	if c.convAt < 0 {
		return
	}
	want := c.convTo
	for _, in := range c.w.liveInstances() {
		if l := in.rt.observed(); l.Holder != want.in.ID || uint64(l.Token) != want.tok {
			c.violate(Liveness, in, fmt.Sprintf("%s sees leader %q (token %d), not %s (token %d)", in.label, l.Holder, l.Token, want.in.ID, want.tok))
		}
	}
}

// finish runs the end-of-run checks.
func (c *checker) finish() {
	for _, in := range c.w.insts {
		if in.crashed {
			continue
		}
		if t := c.open[in]; t != nil {
			c.violate(Callbacks, in, fmt.Sprintf("%s: Run returned with term %d open", in.label, t.tok))
			c.end(t)
		}
		if in.cb.open {
			c.violate(Callbacks, in, fmt.Sprintf("%s: OnElected(%d) never followed by OnDemoted", in.label, in.cb.tok))
		}
		if names := c.endShards(in, false); len(names) > 0 {
			c.violate(Callbacks, in, fmt.Sprintf("%s: Run returned holding %v", in.label, names))
		}
	}
	for _, t := range c.terms {
		if t.end < 0 {
			c.end(t)
		}
	}
}

// Lock clients (locks.go). A holder believes it holds its lock from the
// grant until the hold ends or its own clock reaches the deadline (when its
// lock's context is done), whichever is first; a crash ends it.

// asked: l called for a lock and waits for the answer (I5, I7).
func (c *checker) asked(l *lockClient) { c.waiting = append(c.waiting, l) }

// answered checks the answer's time against the call's deadline plus one
// OpTimeout, unless the process paused meanwhile (I5).
func (c *checker) answered(l *lockClient, what string) {
	c.waiting = slices.DeleteFunc(c.waiting, func(o *lockClient) bool { return o == l })
	if late := l.in.local().Sub(l.bound); late > 0 && !l.pausedSinceCall() {
		c.violate(Liveness, l.in, fmt.Sprintf("%s's call for %s was answered (%s) %v after its deadline and an OpTimeout", l.in.label, l.name, what, late))
	}
}

// granted: l holds its lock for term t: no one else believes it holds the
// lock (I1), the token is above every earlier grant's (I2), and no live,
// undisturbed fair waiter with an earlier ticket still waits (I7).
func (c *checker) granted(l *lockClient, t election.Term) {
	in, lock, sem := l.in, l.held, ""
	lsem := l.curSem()
	if lsem != nil {
		sem = l.name
	}
	holders := 0 // of sem's slots, in belief
	semN := 0    // the fewest slots any of them, l included, asked for
	if sem != "" {
		semN = lsem.N()
	}
	for _, o := range c.w.insts {
		h := c.open[o]
		if h == nil || o == in || !c.believes(h) {
			continue
		}
		if h.lock == lock {
			c.violate(OneLeader, in, fmt.Sprintf("%s is granted %s (token %d) while %s believes it holds it (token %d)", in.label, lock, t.Token, o.label, h.tok))
		}
		if sem != "" && h.sem == sem {
			holders++
			semN = min(semN, h.semN)
		}
	}
	if sem != "" && holders == lsem.N()-1 {
		c.stats.SemFull++
	}
	if sem != "" && holders >= semN {
		c.violate(OneLeader, in, fmt.Sprintf("%s is granted %s (token %d, asking for %d slots) while %d others believe they hold a slot of %s: over %d", in.label, lock, t.Token, lsem.N(), holders, sem, semN))
	}
	if uint64(t.Token) <= c.lockTok[lock] {
		c.violate(Tokens, in, fmt.Sprintf("%s is granted %s with token %d, not above %d granted before", in.label, lock, t.Token, c.lockTok[lock]))
	}
	c.lockTok[lock] = max(c.lockTok[lock], uint64(t.Token))
	for _, q := range c.waiting {
		if l.fair && l.ticket != 0 && q != l && q.fair && q.name == l.name && q.ticket != 0 && q.ticket < l.ticket && !q.upset() {
			c.violate(FairOrder, in, fmt.Sprintf("%s is granted %s with ticket %d while %s waits, live, with ticket %d", in.label, l.name, l.ticket, q.in.label, q.ticket))
		}
	}
	h := &term{in: in, tok: uint64(t.Token), start: c.w.now, end: -1, lock: lock, sem: sem, deadline: t.Deadline}
	if sem != "" {
		h.semN = lsem.N()
	}
	c.open[in] = h
	c.terms = append(c.terms, h)
	c.stats.Terms++
}

func (c *checker) believes(t *term) bool {
	return t.deadline.IsZero() || t.in.local().Before(t.deadline)
}

// extended: in's hold goes on, to a later deadline.
func (c *checker) extended(in *instance, deadline time.Time) {
	if t := c.open[in]; t != nil && c.believes(t) {
		t.deadline = deadline
	}
}

// lockHandoff: l's waiting call lk was woken with its lock free: someone
// must be granted the lock within d, unless l's call was disturbed or
// answered meanwhile (I5).
func (c *checker) lockHandoff(l *lockClient, lk *lockcore.Lock, d time.Duration) {
	from, name, tok := c.w.now, l.name, c.lockTok[l.name]
	c.w.at(from+d, nil, func() {
		if c.lockTok[name] != tok || l.curLock() != lk || l.dead || l.upset() || lk.Answered() {
			return
		}
		c.violate(Liveness, l.in, fmt.Sprintf("%s was woken at %s with %s free, and nobody was granted it within %v", l.in.label, fmtTime(from), name, d))
	})
}

// released: in's hold is over.
func (c *checker) released(in *instance) {
	if t := c.open[in]; t != nil {
		c.end(t)
	}
}

// resource is what the leaders write to: a fencing.Guard in front of it, or
// nothing (Unfenced), in which case the checker flags what the guard would
// have refused.
type resource struct {
	w       *world
	fenced  bool
	guard   fencing.Guard
	highest uint64 // highest token accepted
}

func (r *resource) write(in *instance, tok uint64) {
	w := r.w
	prev := r.highest
	fate := wAccepted
	if r.fenced {
		err := r.guard.Do(leaseName, fencing.Token(tok), func() error { return nil })
		switch {
		case errors.Is(err, fencing.ErrStaleToken):
			fate = wRefused
		case err != nil:
			w.chk.violate(Fencing, in, fmt.Sprintf("%s: guard: %v", in.label, err))
			return
		}
	}
	if fate == wAccepted && tok < prev {
		fate = wStale
	}
	w.trace(in, line{what: mWrite, tok: int64(tok), code: int64(fate), prev: int64(prev)})
	if w.tl != nil {
		w.tl.write(in.node, w.now, fate)
	}
	switch fate {
	case wRefused:
		w.chk.stats.Refused++
	case wStale:
		w.chk.stats.StaleAccepted++
		w.chk.violate(Fencing, in, fmt.Sprintf("%s's write with token %d accepted after token %d", in.label, tok, prev))
	default:
		w.chk.stats.Accepted++
		r.highest = tok
	}
}
