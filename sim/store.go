package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/engine"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

var (
	// errUnavailable is wrapped by the error of a request the store refused
	// before applying it (throttled, overloaded, a 5xx).
	errUnavailable = errors.New("sim: store unavailable")
	// errReset is wrapped by the error of a write whose connection broke
	// after it was sent: it may or may not have been applied.
	errReset = errors.New("sim: connection reset after the request was sent")
)

// faults are the store's standing faults; probabilities are in parts per
// million of requests.
type faults struct {
	ErrorPPM         int           // requests refused before they are applied
	LostRenewPPM     int           // renewals applied whose answer is lost
	LostTakeoverPPM  int           // takeovers applied whose answer is lost
	LostAsErrorPPM   int           // of the lost answers, those that come back as errReset instead of never
	DelayPutPPM      int           // writes that land only after the writer's OpTimeout
	DelayMax         time.Duration // how much later than that, at most
	PlainConflictPPM int           // conflicts reported without the current record (as S3's 412 does)
	// StalePPM of the reads that may be served stale (Op.Stale: followers'
	// polls, where the scenario turns StaleReads on) return the record as
	// it was up to StaleMax before they arrive.
	StalePPM int
	StaleMax time.Duration
}

// request is one store call on its way: sent by an instance, applied when it
// reaches the store, answered when the answer reaches the instance.
type request struct {
	id     int64
	in     *instance
	kind   election.OpKind
	opID   uint64 // fast tier: the Machine's op
	rec    lease.Record
	expect lease.Version
	down   time.Duration // delay of the answer
	res    reply
	// renewal and released describe an applied write, for hooks and stats.
	renewal bool
	// early: sent while a term's callbacks were pending (world.stage).
	early bool
	// reg: a call on a plain record (the standby's, a lock's), not the
	// lease's; plan: of the read a leader makes to find the standby to
	// wake (fast tier).
	reg  *register
	plan *engine.WakePlan
	// stale: a read that a stale answer may serve.
	stale bool
	// abandoned: the caller stopped waiting (its context is done). Guarded
	// by world.mu, since real-tier goroutines set it.
	abandoned bool
	ch        chan reply // real tier: the caller waits here
	// pending counts its events in the queue or held; a fast-tier request
	// (reused) goes back to the world's spares once none is left and its
	// caller no longer waits on it.
	pending int32
	reused  bool
	// flight is the fast tier's engine call waiting on it (nil: none), at
	// slot in its engineHost's pending.
	flight *host.Flight
	slot   int
	// sent: it reached store.send; next is then the true time of its next
	// event in the queue (its arrival, or its answer), or never.
	sent bool
	next time.Duration
}

type reply struct {
	rec lease.Record
	ver lease.Version
	err error
}

// store is a linearizable map of compare-and-swap records, reached over
// links with latency and faults: every request takes effect at the one true
// instant it arrives. The lease has every fault of the scenario; the plain
// records beside it (registers) only refusals.
type store struct {
	w           *world
	lat         latency
	f           faults
	exists      bool
	rec         lease.Record
	ver         lease.Version
	verN        int
	maxEver     uint64         // highest token ever stored
	maxHolder   string         // who stored it
	history     []lease.Record // records that began a term or released one, for restores
	lostAt      time.Duration  // when the record was last deleted or written back; -1: never
	lastArrival time.Duration  // latest arrival of any request sent so far
	writtenAt   time.Duration  // when the lease was last written
	readAt      time.Duration  // when a read first arrived after that; -1: none yet

	sb   *register            // the lease's standby record
	regs map[string]*register // the lock clients' records, by name

	// past: the lease's states over the last Faults.StaleMax, oldest
	// first, for stale reads.
	past []pastState
	// journal: with a Lossy plan, the lease's states over the last
	// lossWindow, oldest first, for a failover that loses the latest
	// writes.
	journal []pastState
}

// register is a plain record: the standby record, a lock's or its fair
// queue's.
type register struct {
	name   string
	label  string // in traces
	exists bool
	rec    lease.Record
	ver    lease.Version
	// written: when it was last written.
	written time.Duration
	// past: its states over the last Faults.StaleMax, for stale reads.
	past []pastState
}

// call stages in's store call op on the record reg (nil: the lease),
// stamped as the host stamps a write (the naive strategy stamps its own
// wall time). Its request is reused once done with (reusing).
func (w *world) call(in *instance, op election.Op, reg *register) *request {
	if op.Kind == election.OpPut && op.Record.WrittenAt.IsZero() {
		op.Record.WrittenAt = in.local().Round(0).UTC()
	}
	r := w.newRequest()
	*r = request{in: in, kind: op.Kind, opID: op.ID, rec: op.Record, expect: op.Expect, reg: reg, stale: op.Stale, reused: true}
	w.stage(item{in: in, src: srcOf(reg, w.store), kind: itRequest, req: r})
	return r
}

// srcOf returns the source of a call on reg: the standby record's calls
// run beside the lease's, so they are told apart.
func srcOf(reg *register, s *store) source {
	if reg != nil && reg == s.sb {
		return srcStandby
	}
	return srcStore
}

// newRequest returns a request done with, or a new one.
func (w *world) newRequest() *request {
	if n := len(w.spareReqs); n > 0 {
		r := w.spareReqs[n-1]
		w.spareReqs = w.spareReqs[:n-1]
		return r
	}
	return new(request)
}

// register returns the plain record called name, made on first use.
func (s *store) register(name string) *register {
	g := s.regs[name]
	if g == nil {
		g = &register{name: name, label: name}
		s.regs[name] = g
	}
	return g
}

type pastState struct {
	until  time.Duration // when it was replaced
	exists bool
	rec    lease.Record
	ver    lease.Version
}

// replaced notes the lease's current state as ending now, before a write,
// a loss or a restore changes it.
func (s *store) replaced() {
	if s.w.plan.Lossy {
		s.note()
	}
	if s.f.StalePPM == 0 {
		return
	}
	s.past = s.remember(s.past, s.exists, s.rec, s.ver)
}

// lossWindow is how far back a failover of a Lossy store may lose writes.
const lossWindow = 5 * time.Second

// note adds the lease's current state, ending now, to the journal a
// failover rolls back along, and drops those that ended over lossWindow
// ago.
func (s *store) note() {
	now := s.w.now
	i := 0
	for i < len(s.journal) && s.journal[i].until < now-lossWindow {
		i++
	}
	s.journal = append(s.journal[i:], pastState{until: now, exists: s.exists, rec: s.rec, ver: s.ver})
}

// remember returns past with the state (exists, rec, ver) ending now
// added, and those that ended over StaleMax ago dropped.
func (s *store) remember(past []pastState, exists bool, rec lease.Record, ver lease.Version) []pastState {
	now := s.w.now
	i := 0
	for i < len(past) && past[i].until < now-s.f.StaleMax {
		i++
	}
	return append(past[i:], pastState{until: now, exists: exists, rec: rec, ver: ver})
}

// staleState returns the lease's state lag ago.
func (s *store) staleState(lag time.Duration) (bool, lease.Record, lease.Version) {
	return stateAt(s.past, s.w.now-lag, s.exists, s.rec, s.ver)
}

// stateAt returns the state at instant at, from past and the current one.
func stateAt(past []pastState, at time.Duration, exists bool, rec lease.Record, ver lease.Version) (bool, lease.Record, lease.Version) {
	for _, p := range past {
		if at < p.until {
			return p.exists, p.rec, p.ver
		}
	}
	return exists, rec, ver
}

func newStore(w *world, lat latency, f faults) *store {
	sb := &register{name: w.lease + election.StandbySuffix, label: "standby"}
	return &store{w: w, lat: lat, f: f, lostAt: -1, readAt: -1, regs: map[string]*register{sb.name: sb}, sb: sb}
}

func (s *store) send(r *request) {
	w := s.w
	in := r.in
	w.reqID++
	r.id = w.reqID
	r.sent, r.next = true, never
	w.chk.stats.Requests++
	name := w.lease
	if g := r.reg; g != nil {
		name = g.name
		if g == s.sb {
			w.chk.stats.StandbyRequests++
		}
		w.trace(in, line{what: mSend, req: r.id, op: int64(r.kind), tok: int64(r.rec.Token), text: string(r.expect), flags: g.label})
	} else if r.kind == election.OpPut {
		flags := ""
		if r.rec.Released {
			flags = "released"
			if r.early {
				w.chk.violate(Callbacks, in, fmt.Sprintf("%s released the lease before the callbacks of its term returned", in.label))
			}
		}
		w.trace(in, line{what: mSend, req: r.id, op: int64(r.kind), tok: int64(r.rec.Token), text: string(r.expect), flags: flags})
		if s.exists && r.rec.Token == s.rec.Token && r.rec.Holder == s.rec.Holder && !r.rec.Released {
			w.hook(hookRenewalSent, in)
		}
	} else {
		w.trace(in, line{what: mSend, req: r.id, op: int64(r.kind)})
	}
	if in.node.cut {
		w.chk.stats.Dropped++
		w.trace(in, line{what: mDrop, req: r.id, text: "cut off from the store"})
		return
	}
	up, down := s.lat.draw(w.rng), s.lat.draw(w.rng)
	r.down = down
	if r.kind == election.OpPut {
		if err := r.rec.Validate(name); err != nil {
			// A real store refuses it before sending; an invalid record is a
			// bug in whoever wrote it.
			w.chk.violate(Tokens, in, fmt.Sprintf("%s wrote an invalid record: %v", in.label, err))
			r.res = reply{err: fmt.Errorf("put %w", err)}
			r.next = w.now
			w.push(event{at: w.now, kind: evRespond, req: r})
			return
		}
	}
	if chance(w.rng, s.f.ErrorPPM) {
		w.chk.stats.Errors++
		r.res = reply{err: fmt.Errorf("%v %q: %w", r.kind, name, errUnavailable)}
		r.next = w.now + up + down
		w.push(event{at: r.next, kind: evRespond, req: r})
		return
	}
	if r.kind == election.OpPut && r.reg == nil && chance(w.rng, s.f.DelayPutPPM) {
		w.chk.stats.Delayed++
		up = in.timing.OpTimeout + uniform(w.rng, time.Millisecond, max(s.f.DelayMax, time.Millisecond))
	}
	s.lastArrival = max(s.lastArrival, w.now+up)
	in.lastArrival = max(in.lastArrival, w.now+up)
	r.next = w.now + up
	w.push(event{at: r.next, kind: evArrive, req: r})
}

// arrive applies r: this instant is its linearization point.
func (s *store) arrive(r *request) {
	w := s.w
	in := r.in
	if r.reg != nil {
		s.arrivePlain(r)
		return
	}
	switch r.kind {
	case election.OpGet:
		if s.readAt < 0 {
			s.readAt = w.now
		}
		exists, rec, ver, flags := s.exists, s.rec, s.ver, ""
		if r.stale && chance(w.rng, s.f.StalePPM) {
			exists, rec, ver = s.staleState(uniform(w.rng, 0, s.f.StaleMax))
			flags = "stale"
			w.chk.stats.StaleReads++
		}
		if !exists {
			r.res = reply{err: lease.NotFound(w.lease)}
			w.trace(in, line{what: mApply, req: r.id, op: int64(r.kind), code: oNotFound, flags: flags})
		} else {
			r.res = reply{rec: rec.Clone(), ver: ver}
			w.trace(in, line{what: mApply, req: r.id, op: int64(r.kind), code: oOK, text: string(ver), holder: rec.Holder, tok: int64(rec.Token), flags: flags})
		}
	case election.OpPut:
		if s.exists != (r.expect != lease.NoVersion) || s.exists && s.ver != r.expect {
			w.chk.stats.Conflicts++
			if chance(w.rng, s.f.PlainConflictPPM) {
				r.res = reply{err: lease.Conflict(w.lease)}
			} else {
				r.res = reply{err: &lease.ConflictError{Name: w.lease, Current: s.rec.Clone(), Version: s.ver, Found: s.exists}}
			}
			w.trace(in, line{what: mApply, req: r.id, op: int64(r.kind), code: oConflict, text: string(s.ver)})
			break
		}
		if s.exists && !s.rec.Released && r.rec.Token > s.rec.Token {
			s.checkWait(in, w.lease, s.rec, max(s.writtenAt, s.lostAt))
		}
		s.checkWrite(in, r.rec)
		r.renewal = s.exists && r.rec.Token == s.rec.Token && !r.rec.Released
		takeover := !s.exists || r.rec.Token != s.rec.Token
		if takeover || r.rec.Released {
			s.history = append(s.history, r.rec.Clone())
		}
		if r.rec.Released {
			w.chk.stats.Releases++
		}
		prev, prevExists := s.rec, s.exists
		s.replaced()
		s.writtenAt, s.readAt = w.now, -1
		s.verN++
		s.ver = lease.Version("v" + strconv.Itoa(s.verN))
		s.rec, s.exists = r.rec.Clone(), true
		r.res = reply{ver: s.ver}
		if w.user != nil {
			w.user.applied(w.lease, r.rec)
		}
		w.trace(in, line{what: mApply, req: r.id, op: int64(r.kind), code: oOK, text: string(s.ver), holder: r.rec.Holder, tok: int64(r.rec.Token)})
		if w.plan.Feed != nil {
			told := s.rec.Clone()
			if w.opt.trustRecords && prevExists && !prev.Released {
				// The broken variant: the event says the term before it
				// goes on, as a follower that times a record it has not
				// read would take it.
				told.Holder, told.Token, told.Duration = prev.Holder, prev.Token, prev.Duration
			}
			w.feed(in, lease.Event{Version: s.ver, Released: r.rec.Released, Record: &told})
		}
		if r.renewal && chance(w.rng, s.f.LostRenewPPM) || takeover && chance(w.rng, s.f.LostTakeoverPPM) {
			w.chk.stats.Lost++
			if !chance(w.rng, s.f.LostAsErrorPPM) {
				w.trace(in, line{what: mLost, req: r.id, text: "the answer is lost"})
				return
			}
			r.res = reply{err: fmt.Errorf("put lease %q: %w", w.lease, errReset)}
		}
	}
	r.next = w.now + r.down
	w.push(event{at: r.next, kind: evRespond, req: r})
}

// readSoon reports whether a read arrived within d of the lease's last
// write.
func (s *store) readSoon(d time.Duration) bool {
	return s.readAt >= 0 && s.readAt-s.writtenAt <= d
}

// arrivePlain applies r to its plain record.
func (s *store) arrivePlain(r *request) {
	w, g := s.w, r.reg
	exists, rec, ver := g.exists, g.rec, g.ver
	if r.kind == election.OpGet && r.stale && s.f.StalePPM > 0 && chance(w.rng, s.f.StalePPM) {
		exists, rec, ver = stateAt(g.past, w.now-uniform(w.rng, 0, s.f.StaleMax), exists, rec, ver)
		w.chk.stats.StaleReads++
	}
	switch {
	case r.kind == election.OpGet && !exists:
		r.res = reply{err: lease.NotFound(g.name)}
	case r.kind == election.OpGet:
		r.res = reply{rec: rec.Clone(), ver: ver}
	case g.exists != (r.expect != lease.NoVersion) || g.exists && g.ver != r.expect:
		w.chk.stats.Conflicts++
		r.res = reply{err: &lease.ConflictError{Name: g.name, Current: g.rec.Clone(), Version: g.ver, Found: g.exists}}
	default:
		if r.rec.Released {
			w.chk.stats.Releases++
		}
		if g.exists && !g.rec.Released && r.rec.Token > g.rec.Token && !strings.Contains(g.name, lockcore.QueueSuffix) &&
			!strings.HasSuffix(g.name, lockcore.WakeSuffix) && // a queue's and a wake record are not leases
			!(g == s.sb && preempts(r.rec, g.rec)) {
			s.checkWait(r.in, g.name, g.rec, g.written)
		}
		if s.f.StalePPM > 0 {
			g.past = s.remember(g.past, g.exists, g.rec, g.ver)
		}
		s.verN++
		g.ver = lease.Version("v" + strconv.Itoa(s.verN))
		g.rec, g.exists, g.written = r.rec.Clone(), true, w.now
		r.res = reply{ver: g.ver}
		if w.user != nil {
			w.user.applied(g.name, r.rec)
		}
	}
	shown := r.res.rec // a read's record, or the one written
	if r.kind == election.OpPut && r.res.err == nil {
		shown = r.rec
	}
	w.trace(r.in, line{what: mApply, req: r.id, op: int64(r.kind), code: outcome(r.res.err), text: string(r.res.ver), holder: shown.Holder, tok: int64(shown.Token), flags: g.label})
	w.push(event{at: w.now + r.down, kind: evRespond, req: r})
}

// preempts reports whether a write of rec over held is a candidate of
// higher priority taking the standby record from a lower one: allowed at
// once (election.Config.Preempt), for the standby's belief protects
// nothing.
func preempts(rec, held lease.Record) bool {
	_, p := standby.Parse(rec.Payload)
	_, q := standby.Parse(held.Payload)
	return p > q
}

// checkWait holds a takeover to the protocol's wait, at the store (I1): a
// record that was held is taken no sooner than its ttl after it was
// written (or written back), in true time. A follower waits ttl×(1+ρ) by
// its own clock from its first sight of that version, which came after the
// write; a clock within ρ has then let at least ttl pass. Only a taker that
// skipped part of its wait (a message trusted, a clock misread) lands
// sooner, while the holder may still believe it holds the lease: a notice
// or wake-up that shortened a takeover is caught here even when the holder
// had crashed and no two believers overlap.
func (s *store) checkWait(in *instance, name string, held lease.Record, written time.Duration) {
	if age := s.w.now - written; age < held.Duration {
		s.w.chk.violate(OneLeader, in, fmt.Sprintf("%s takes %s (token %d) %v after %s wrote it, before its lease of %v ran out",
			in.label, name, held.Token, age, held.Holder, held.Duration))
	}
}

// checkWrite verifies I2 at the store: a write either keeps the holder and
// token of the record it replaces, or mints a token above every token the
// store ever held: the next one while the record is the newest (on a
// Lossy store, any above it: takeovers mint from the wall clock), and
// above the highest one after the record was deleted or written back.
func (s *store) checkWrite(in *instance, rec lease.Record) {
	switch {
	case s.exists && rec.Token == s.rec.Token && rec.Holder != s.rec.Holder:
		s.w.chk.violate(Tokens, in, fmt.Sprintf("token %d held by %s and then by %s", rec.Token, s.rec.Holder, rec.Holder))
	case s.exists && rec.Token == s.rec.Token:
	case s.w.plan.Lossy && rec.Token == s.maxEver && rec.Holder == s.maxHolder:
		// A takeover a failover lost, sent again by its writer after a
		// read-back found it missing: the same term's token, which no
		// term has begun with.
	case rec.Token <= s.maxEver:
		s.w.chk.violate(Tokens, in, fmt.Sprintf("token %d minted after token %d was stored", rec.Token, s.maxEver))
	case s.exists && s.rec.Token == s.maxEver && rec.Token != s.rec.Token+1 && !s.w.plan.Lossy:
		s.w.chk.violate(Tokens, in, fmt.Sprintf("token %d follows token %d", rec.Token, s.rec.Token))
	}
	if rec.Token > s.maxEver {
		s.maxEver, s.maxHolder = rec.Token, rec.Holder
	}
}

// respond delivers r's answer, unless nobody can receive it.
func (s *store) respond(e *event) {
	w := s.w
	r := e.req
	in := r.in
	if !in.live() {
		return // the process is gone
	}
	if w.shared {
		w.mu.Lock()
	}
	abandoned := r.abandoned
	if w.shared {
		w.mu.Unlock()
	}
	switch {
	case abandoned:
		w.trace(in, line{what: mLost, req: r.id, text: "the caller gave up"})
		return
	case in.node.cut:
		w.trace(in, line{what: mLost, req: r.id, text: "cut off from the store"})
		return
	case in.paused:
		in.held = append(in.held, *e)
		r.pending++ // held, not done with
		return
	}
	w.trace(in, line{what: mRecv, req: r.id, code: outcome(r.res.err), text: string(r.res.ver)})
	in.rt.deliver(r)
	w.settle(in)
	if r.renewal && r.res.err == nil {
		w.hook(hookRenewed, in)
	}
}

func outcome(err error) int64 {
	switch {
	case err == nil:
		return oOK
	case errors.Is(err, lease.ErrConflict):
		return oConflict
	case errors.Is(err, lease.ErrNotFound):
		return oNotFound
	}
	return oError
}
