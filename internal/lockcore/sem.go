package lockcore

import (
	"errors"
	"fmt"
	"github.com/tenure-go/tenure/fencing"
	"log/slog"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/lease"
)

// Semaphores. A semaphore of n slots on NAME is n locks, one per slot
// (NAME::slot.0 … NAME::slot.N-1), each taken, renewed, waited out and
// fenced by the lock rules, and a count record (NAME::slots) that fixes n
// for every holder: a caller that asks for another n is refused, so that
// two callers cannot make the semaphore wider between them. A caller holds
// one slot at most; so never more than n callers believe they hold a slot
// of NAME, because never two believe they hold one slot.
//
// The count record fixes n only while it stands. A caller that finds it
// missing (never written, deleted, lost with a store's data) or released
// (tenure release --force) writes it, with its own n, only once the
// semaphore has drained: every slot record there may be, all MaxSlots of
// them, read free (absent or released) or waited out as a silent holder's
// (read unchanged for its lease × (1+MaxDrift) on this caller's clock).
// Until then it waits, reading them again every poll, and a TryLock is
// busy. So a lost count record never lets the semaphore widen (a caller
// asking for more slots taking one beside the holders of fewer) nor narrow
// while a slot may still be believed held. It costs MaxSlots reads at a
// name's first use, and after a loss a wait for the holders to leave.
//
// A slot granted is kept only once the count record, read again after the
// grant, still stands with n; otherwise it is given back and the call
// starts over (reading the count record, and draining if it is gone). A
// caller that took a slot as the count record was lost, or while another
// drained, thus never believes beside a caller of another n: a count
// written after its read drained its slot first, and one written before
// it is the one it read.
//
// Taking a slot: the count record and every slot are read at once (one
// round trip); a slot found free is tried (in random order, so that
// callers spread over the free ones), then the next free one if another
// caller got there first. TryLock answers busy, with every holder, when
// no slot was free. Lock then waits on every slot at once: each slot's
// lock polls its record and waits out a silent holder, and the first slot
// granted is kept; another granted in the same instant is given back at
// once. A fair Lock joins the name's queue (NAME::queue) unless the queue
// was empty and a slot free, and only its head campaigns, for every slot:
// the queue's lock is slot 0's, and the other slots follow its turn.

// Semaphore records, for SemHost.Call.
const (
	RecSlots   = -4 // the count record, NAME::slots
	RecProbe   = -5 // a slot's record, read by the semaphore itself
	RecDrain   = -6 // a slot's record, any of MaxSlots, read to find it drained
	RecConfirm = -7 // the count record, read again once a slot is granted
)

// SlotsSuffix names a semaphore's count record; SlotSuffix its slots.
const (
	SlotsSuffix = "::slots"
	SlotSuffix  = "::slot."
)

// MaxSlots bounds a semaphore's slots: a waiter reads every one.
const MaxSlots = 64

// slotsHolder is the holder of every count record.
const slotsHolder = "tenure-slots"

// SlotName names slot i of the semaphore name.
func SlotName(name string, i int) string { return name + SlotSuffix + strconv.Itoa(i) }

// SemRecordName names record rec of slot's lock (rec as RecordName's, or
// RecProbe) or, for RecSlots, the semaphore's count record. The queue's
// records are the name's own.
func SemRecordName(name string, slot, rec int) string {
	switch rec {
	case RecSlots, RecConfirm:
		return name + SlotsSuffix
	case RecLock, RecProbe, RecDrain:
		return SlotName(name, slot)
	case RecWake:
		return SlotName(name, slot) + WakeSuffix
	}
	return RecordName(name, rec)
}

// LongestSemName is the longest name of the records of a semaphore of n
// slots on name.
func LongestSemName(name string, n int, fair bool) string {
	s := SlotName(name, n-1)
	if fair && len(LongestName(name)) > len(s) {
		return LongestName(name)
	}
	return s
}

// SemHost is what a Sem asks of the runtime around it, as Host is for a
// Lock, with the slot each call and answer is for.
type SemHost interface {
	Now() time.Time
	// Call starts a store call on record rec of slot (SemRecordName; slot
	// -1 with RecSlots or RecIndex). A call on RecLock is timed by the
	// slot's lock (Cancel abandons it); every other must be answered
	// within OpTimeout, with an error if need be. Answers go to
	// Sem.Result, with the slot and rec of the call; a write's carries the
	// record written. There is at most one call per record in flight.
	Call(slot int, op election.Op, rec int)
	// Cancel abandons the call in flight on slot's record (RecLock).
	Cancel(slot int)
	Log(level slog.Level, msg string, args ...any)

	// Granted answers the caller: slot is held, for term t.
	Granted(slot int, t election.Term)
	// Busy answers a TryLock: every slot is held, by holders[i].
	Busy(holders []election.Leader)
	// Refused answers the caller with err.
	Refused(err error)
	// Publish reports what the held slot's Machine knows after a step.
	Publish(s driver.Snapshot)
	// Ended ends the held term.
	Ended(t election.Term, r election.Reason)
	// Reschedule says that Due may have changed.
	Reschedule()
	// Retired says that the semaphore call is over.
	Retired()
}

// ErrSlotsMismatch is wrapped by the error of a call that asked for
// another number of slots than the name's holders use.
var ErrSlotsMismatch = errors.New("tenure: the semaphore's holders use another number of slots")

// slotsError is the error of a call for want slots of a semaphore that
// has have.
type slotsError struct {
	name       string
	have, want int
}

func (e *slotsError) Error() string {
	return fmt.Sprintf("tenure: lock %q has %d slots (%s), not %d: every caller must ask for the same number; to change it, tenure release --force %s (callers of the new number wait until every holder has left)",
		e.name, e.have, e.name+SlotsSuffix, e.want, e.name+SlotsSuffix)
}

func (e *slotsError) Is(target error) bool { return target == ErrSlotsMismatch }

// Sem is one call for a slot of a semaphore. The zero Sem is unusable:
// call Init.
type Sem struct {
	h     SemHost
	name  string
	n     int
	cfg   *election.Config
	mk    func() (Machine, error)
	slots []slotLock

	try, fair  bool
	phase      semPhase
	calls      int // the semaphore's own calls in flight
	count      countState
	seen       []election.Leader // per slot: the holder last read; "" free
	unread     []bool            // per slot: its read failed, so not known free
	probeErr   error             // a slot's read failed
	queued     bool              // fair: the queue's index lists waiters
	free       []int             // slots read free, not yet tried, in random order
	retryAt    time.Time         // the count record failed, or the drain waits: read again
	drain      []drainSlot       // every slot there may be, while the count record is to be written; nil: not read
	drained    bool              // every slot was found drained since the count record was found missing
	confirming int               // the slot granted whose count read (RecConfirm) is awaited; -1 none
	confirm    confirmState      // that read's outcome
	restart    bool              // the count record failed a confirm: give every slot back, then check again

	held     int   // the slot held; -1 none
	heldLock *Lock // its lock, kept once retired (GaveUp, Err)
	answered bool
	stopping bool
	lost     bool
	retired  bool
}

type semPhase uint8

const (
	semCheck semPhase = iota // reading the count record and every slot
	semCount                 // writing the count record
	semTry                   // trying a free slot
	semWait                  // waiting on every slot
	semDrain                 // reading every slot there may be, before writing the count record
)

// confirmState is the outcome of the count record's read after a grant.
type confirmState struct {
	done bool
	ok   bool  // it stands, with n
	err  error // it stands with another n, or is not a count record: refuse
}

// drainSlot is what the drain knows of one slot's record.
type drainSlot struct {
	ver   lease.Version // as last read; NoVersion: absent or released
	since time.Time     // when ver was first read, on this caller's clock
	ttl   time.Duration // the holder's lease, from the record
	err   bool          // the last read failed: not known drained
}

type countState struct {
	ver   lease.Version
	found bool
	rec   lease.Record
	err   error
}

// slotLock is one slot's lock, and what it told the semaphore.
type slotLock struct {
	s       *Sem
	i       int
	lk      *Lock // nil: none (not started, or retired)
	granted bool  // its term began: keep it, or give it back
	term    election.Term
	refused error
	bad     error // its record cannot be read (ErrInvalidRecord): not waited on
}

// Init makes s a call for one of n slots of the semaphore name, for h,
// with a Machine per slot for cfg (kept: it must not change), or made by
// mk when mk is not nil. A TryLock (try) answers busy when every slot is
// held; a fair Lock waits its turn in the name's queue.
func (s *Sem) Init(h SemHost, name string, n int, cfg *election.Config, try, fair bool, mk func() (Machine, error)) error {
	if n < 1 || n > MaxSlots {
		return fmt.Errorf("tenure: lock %q: %d slots: a semaphore has 1 to %d", name, n, MaxSlots)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if mk == nil {
		mk = func() (Machine, error) { return election.NewShared(cfg) }
	}
	*s = Sem{h: h, name: name, n: n, cfg: cfg, mk: mk, try: try, fair: fair && !try, held: -1, confirming: -1, answered: s.answered}
	s.slots = make([]slotLock, n)
	s.seen, s.unread = make([]election.Leader, n), make([]bool, n)
	for i := range s.slots {
		s.slots[i] = slotLock{s: s, i: i}
	}
	return nil
}

// Start reads the count record and every slot.
func (s *Sem) Start() {
	s.check()
	s.after()
}

func (s *Sem) check() {
	s.phase, s.probeErr, s.queued, s.retryAt = semCheck, nil, false, time.Time{}
	s.call(-1, RecSlots, election.Op{Kind: election.OpGet})
	for i := range s.n {
		s.call(i, RecProbe, election.Op{Kind: election.OpGet})
	}
	if s.fair {
		s.call(-1, RecIndex, election.Op{Kind: election.OpGet})
	}
}

func (s *Sem) call(slot, rec int, op election.Op) {
	s.calls++
	s.h.Call(slot, op, rec)
}

// Result takes the answer of a call on record rec of slot; put says
// whether it was a write.
func (s *Sem) Result(slot, rec int, r election.Result, put bool) {
	switch {
	case rec == RecSlots || rec == RecProbe || rec == RecDrain || rec == RecConfirm || slot < 0:
		s.calls--
		s.ownResult(slot, rec, r)
	case rec == RecLock:
		if lk := s.slots[slot].lk; lk != nil {
			lk.Result(r)
		}
	default:
		if lk := s.slots[slot].lk; lk != nil {
			lk.QueueResult(r, put)
		}
	}
	s.after()
}

func (s *Sem) ownResult(slot, rec int, r election.Result) {
	notFound := errors.Is(r.Err, lease.ErrNotFound)
	switch rec {
	case RecSlots:
		c := &s.count
		c.err = nil
		switch ce := conflict(r.Err); {
		case r.Err == nil:
			c.rec, c.ver, c.found = r.Record, r.Version, true
		case notFound:
			c.rec, c.ver, c.found = lease.Record{}, lease.NoVersion, false
		case ce != nil:
			c.rec, c.ver, c.found = ce.Current, ce.Version, ce.Found
		default:
			c.err = r.Err
		}
	case RecProbe:
		s.seen[slot], s.unread[slot] = election.Leader{}, false
		switch {
		case r.Err == nil && !r.Record.Released:
			s.seen[slot] = election.Leader{Holder: r.Record.Holder, Token: fencing.Token(r.Record.Token), Payload: r.Record.Payload}
		case r.Err != nil && !notFound:
			s.unread[slot], s.probeErr = true, r.Err // not known free: not tried
		}
	case RecConfirm:
		cf := &s.confirm
		*cf = confirmState{done: true}
		if r.Err != nil || r.Record.Released {
			break // gone, released or unreadable: start over, and drain
		}
		if err := s.countError(r.Record); err != nil {
			cf.err = err
		} else {
			cf.ok = true
		}
	case RecDrain:
		d := &s.drain[slot]
		switch {
		case notFound, r.Err == nil && r.Record.Released:
			*d = drainSlot{ver: lease.NoVersion}
		case r.Err != nil:
			d.err = true // not known drained; a silent holder's wait goes on
		case r.Version != d.ver:
			*d = drainSlot{ver: r.Version, since: s.h.Now(), ttl: r.Record.Duration}
		default:
			d.err = false
		}
		if slot < s.n { // what the try after the drain starts from
			s.seen[slot], s.unread[slot] = election.Leader{}, d.err
			if d.ver != lease.NoVersion {
				s.seen[slot] = election.Leader{Holder: r.Record.Holder, Token: fencing.Token(r.Record.Token), Payload: r.Record.Payload}
			}
		}
	case RecIndex:
		// Unreadable or listing anyone: queue, whose code says what is wrong.
		q, err := appendQueue(nil, r.Record.Payload)
		s.queued = !notFound && (r.Err != nil || err != nil || len(q) > 0 && !r.Record.Released)
	}
}

// Fire runs whatever of the semaphore's timers is due at now.
func (s *Sem) Fire(now time.Time) {
	if !s.retryAt.IsZero() && !now.Before(s.retryAt) {
		s.check()
	}
	for i := range s.slots {
		if lk := s.slots[i].lk; lk != nil {
			if d := lk.Due(); !d.IsZero() && !now.Before(d) {
				lk.Fire(now)
			}
		}
	}
	s.after()
}

// Due returns the instant of the semaphore's next timer; zero if none.
func (s *Sem) Due() time.Time {
	d := s.retryAt
	for i := range s.slots {
		if lk := s.slots[i].lk; lk != nil {
			if t := lk.Due(); !t.IsZero() && (d.IsZero() || t.Before(d)) {
				d = t
			}
		}
	}
	return d
}

// Stop ends the call: the held slot is given back, a waiting call stops
// waiting.
func (s *Sem) Stop() {
	s.stopping = true
	s.after()
}

// Answer claims the one answer to the caller, as Lock.Answer.
func (s *Sem) Answer() bool {
	if s.answered {
		return false
	}
	s.answered = true
	return true
}

// Answered reports whether the caller has had its answer.
func (s *Sem) Answered() bool { return s.answered }

// N returns the semaphore's number of slots.
func (s *Sem) N() int { return s.n }

// Config returns the Machines' configuration; it must not be changed.
func (s *Sem) Config() *election.Config { return s.cfg }

// Slot returns the slot held, or -1.
func (s *Sem) Slot() int { return s.held }

// GaveUp reports whether the held slot's release went unconfirmed.
func (s *Sem) GaveUp() bool { return s.heldLock != nil && s.heldLock.GaveUp() }

// Err returns the last store error seen, or nil.
func (s *Sem) Err() error {
	if s.heldLock != nil {
		return s.heldLock.Err()
	}
	for i := range s.slots {
		if lk := s.slots[i].lk; lk != nil && lk.Err() != nil {
			return lk.Err()
		}
	}
	if s.count.err != nil {
		return s.count.err
	}
	return s.probeErr
}

// Holders returns the holder of each slot as last seen ("" free or not
// known).
func (s *Sem) Holders() []election.Leader {
	ls := make([]election.Leader, s.n)
	for i := range s.slots {
		ls[i] = s.seen[i]
		if lk := s.slots[i].lk; lk != nil {
			ls[i] = lk.Leader()
		}
	}
	return ls
}

// Ticket returns slot 0's queue ticket, as Lock.Ticket.
func (s *Sem) Ticket() uint64 {
	if lk := s.slots[0].lk; lk != nil && s.fair {
		return lk.Ticket()
	}
	return 0
}

func (s *Sem) refuse(err error) {
	if s.Answer() {
		s.h.Refused(err)
	}
	s.stopping = true
}

// after runs once an event has been taken: it acts on what the slots'
// locks said, moves the call on, and retires it once nothing is left.
func (s *Sem) after() {
	if s.retired {
		return
	}
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.granted {
			sl.granted = false
			switch {
			case s.held < 0 && s.confirming < 0 && !s.stopping && !s.restart && !s.answered:
				s.confirming, s.confirm = i, confirmState{}
				s.call(-1, RecConfirm, election.Op{Kind: election.OpGet})
			case s.confirming >= 0 && !s.stopping:
				// Kept until the confirm answers, then given back (wind):
				// given back now, a later ticket could be served first.
			case s.held != i && s.confirming != i:
				sl.lk.Stop() // taken with another, or after the caller left: give it back
			}
		}
		if sl.refused != nil {
			err := sl.refused
			sl.refused = nil
			switch {
			case s.held >= 0 || !s.try && s.phase != semWait:
				// A Lock whose try of a free slot failed waits on every slot.
			case !s.try && errors.Is(err, lease.ErrInvalidRecord) && !errors.Is(err, lease.ErrPermanent) && (i > 0 || !s.fair):
				// One slot's record no one can read: wait on the others;
				// refused only if none is left (a fair call's slot 0 is
				// its queue's, which it cannot do without).
				sl.bad = err
				if s.allBad() {
					s.refuse(err)
				}
			default:
				s.refuse(err)
			}
		}
	}
	if c := s.confirming; c >= 0 && s.confirm.done {
		s.confirming = -1
		lk := s.slots[c].lk
		switch {
		case lk == nil || !lk.Held(): // its term ended meanwhile
		case s.confirm.ok && !s.stopping && s.Answer():
			s.held, s.heldLock = c, lk
			if lead := s.slots[0].lk; lead != nil && s.fair {
				lead.LeaveQueue() // its turn is over
			}
			s.h.Granted(c, s.slots[c].term)
		case s.confirm.err != nil:
			s.refuse(s.confirm.err)
		default:
			s.restart = true
		}
	}
	if s.restart && !s.stopping {
		for i := range s.slots {
			if lk := s.slots[i].lk; lk != nil {
				lk.Stop()
			}
		}
		if !s.anyLock() && s.calls == 0 {
			s.restart, s.drained = false, false
			s.check()
		}
	}
	if s.held >= 0 {
		if lk := s.slots[s.held].lk; lk == nil || !lk.Held() {
			s.lost = true // ended, or retired
		}
	}
	switch {
	case s.stopping || s.lost || s.held >= 0:
		s.wind()
	case s.calls > 0 || !s.retryAt.IsZero() || s.restart:
	case s.phase == semCheck || s.phase == semCount:
		s.checked()
	case s.phase == semDrain:
		s.drainRead()
	case s.phase == semTry:
		s.tryNext()
	case s.phase == semWait:
		s.waitAll()
	}
	if s.phase == semWait && s.fair && s.held < 0 && !s.stopping {
		s.follow()
	}
	if s.calls == 0 && !s.anyLock() && (s.stopping || s.lost) {
		s.retired = true
		s.h.Reschedule()
		s.h.Retired()
		return
	}
	s.h.Reschedule()
}

// wind stops every slot's lock but the one held, and that one too once
// the call is over.
func (s *Sem) wind() {
	for i := range s.slots {
		if lk := s.slots[i].lk; lk != nil && (i != s.held || s.stopping || s.lost) {
			lk.Stop()
		}
	}
}

func (s *Sem) anyLock() bool {
	for i := range s.slots {
		if s.slots[i].lk != nil {
			return true
		}
	}
	return false
}

// checked takes the count record and the slots as read.
func (s *Sem) checked() {
	c := &s.count
	if c.err != nil {
		if s.try || errors.Is(c.err, lease.ErrPermanent) || errors.Is(c.err, lease.ErrInvalidRecord) {
			s.refuse(fmt.Errorf("tenure: lock %q: %w", s.name, c.err))
			return
		}
		s.retryAt = s.h.Now().Add(s.cfg.RetryMax)
		return
	}
	if c.found && !c.rec.Released {
		if err := s.countError(c.rec); err != nil {
			s.refuse(err)
			return
		}
		s.drained = false // a later loss of the record drains again
	} else if !s.drained {
		s.drainStart()
		return
	} else {
		// The first caller after a drain fixes n.
		s.phase = semCount
		rec := lease.Record{Holder: slotsHolder, Token: 1, Duration: s.cfg.LeaseDuration, Payload: []byte(strconv.Itoa(s.n)), Nonce: strconv.FormatUint(s.cfg.Rand.Uint64(), 16)}
		expect := c.ver
		if !c.found {
			expect = lease.NoVersion
		}
		s.call(-1, RecSlots, election.Op{Kind: election.OpPut, Record: rec, Expect: expect})
		return
	}
	if s.try && s.probeErr != nil && !s.anyFree() {
		s.refuse(fmt.Errorf("tenure: lock %q: %w", s.name, s.probeErr)) // a TryLock does not wait out a failing store
		return
	}
	s.free = s.free[:0]
	if !s.queued {
		for i := range s.seen {
			if s.readFree(i) {
				s.free = append(s.free, i)
			}
		}
		s.cfg.Rand.Shuffle(len(s.free), func(i, j int) { s.free[i], s.free[j] = s.free[j], s.free[i] })
	}
	s.phase = semTry
	s.tryNext()
}

// countError says why a count record that stands does not fix n slots:
// it is not one (another holder, or no number), or it fixes another n.
func (s *Sem) countError(rec lease.Record) error {
	n, err := strconv.Atoi(string(rec.Payload))
	switch {
	case rec.Holder != slotsHolder || err != nil || n < 1:
		return fmt.Errorf("tenure: lock %q: its count record %q holds %q by %q, not a number of slots by %q: remove it (tenure release --force) once nobody holds a slot", s.name, s.name+SlotsSuffix, rec.Payload, rec.Holder, slotsHolder)
	case n != s.n:
		return &slotsError{s.name, n, s.n}
	}
	return nil
}

// drainStart reads every slot there may be: the count record is to be
// written, and the slots are the truth of who may believe.
func (s *Sem) drainStart() {
	s.phase = semDrain
	if s.drain == nil {
		s.drain = make([]drainSlot, MaxSlots)
		for i := range s.drain {
			s.drain[i].ver = lease.NoVersion
		}
	}
	for i := range s.drain { // all of them, every round: callers that read the count before it went may take a slot meanwhile
		s.call(i, RecDrain, election.Op{Kind: election.OpGet})
	}
}

// drainRead takes a round of the drain's reads: drained, the count record
// is read again and written; otherwise a TryLock is busy and a Lock reads
// again a poll later.
func (s *Sem) drainRead() {
	now := s.h.Now()
	for i := range s.drain {
		d := &s.drain[i]
		if d.err || d.ver != lease.NoVersion && now.Before(d.since.Add(election.Drift(d.ttl, s.cfg.MaxDrift)+d.ttl)) {
			if s.try {
				s.busy()
				return
			}
			s.phase = semCheck
			s.retryAt = now.Add(s.cfg.PollInterval)
			return
		}
	}
	s.drained = true
	s.phase = semCheck
	s.checked() // the count record as read before the drain: a write that conflicts reads it again
}

// busy answers a TryLock that found no slot it may take, naming the
// holders, and ends the call.
func (s *Sem) busy() {
	if s.Answer() {
		s.h.Busy(s.Holders())
	}
	s.stopping = true
}

func (s *Sem) anyFree() bool {
	for i := range s.seen {
		if s.readFree(i) {
			return true
		}
	}
	return false
}

// readFree reports whether slot i was read free.
func (s *Sem) readFree(i int) bool { return s.seen[i].Holder == "" && !s.unread[i] }

// tryNext tries the next slot read free, once the one tried is over; with
// none left, a TryLock is busy and a Lock waits on every slot.
func (s *Sem) tryNext() {
	if s.anyLock() {
		return // the slot tried: its answer, then its end, come first
	}
	if len(s.free) > 0 {
		i := s.free[0]
		s.free = s.free[1:]
		s.startSlot(i, true, false)
		return
	}
	if s.try {
		s.busy()
		return
	}
	s.phase = semWait
	s.waitAll()
}

// allBad reports whether no slot is left to wait on.
func (s *Sem) allBad() bool {
	for i := range s.slots {
		if s.slots[i].bad == nil {
			return false
		}
	}
	return true
}

// waitAll starts a waiting lock on every slot that has none (and can be
// read): slot 0's waits its turn in the queue if fair, and the others
// follow its turn.
func (s *Sem) waitAll() {
	for i := range s.slots {
		if s.slots[i].lk == nil && s.slots[i].bad == nil {
			s.startSlot(i, false, s.fair && i == 0)
		}
	}
}

// follow opens the other slots' gates while slot 0's lock has its turn.
func (s *Sem) follow() {
	lead := s.slots[0].lk
	open := lead == nil || lead.Turn()
	for i := 1; i < s.n; i++ {
		if lk := s.slots[i].lk; lk != nil {
			lk.setGate(!open, true)
		}
	}
}

func (s *Sem) startSlot(i int, try, fair bool) {
	sl := &s.slots[i]
	m, err := s.mk()
	if err != nil {
		s.refuse(err) // Init validated cfg: not reached
		return
	}
	sl.lk = new(Lock)
	sl.lk.InitMachine(sl, s.name, m, try, fair)
	if fair {
		sl.lk.DeferLeave() // until the grant is confirmed
	}
	if s.fair && !try && i > 0 {
		sl.lk.setGate(true, false) // it follows slot 0's turn in the queue
	}
	sl.lk.Start()
}

// A slot's lock's Host: the semaphore's, for slot i.

func (sl *slotLock) Now() time.Time { return sl.s.h.Now() }

func (sl *slotLock) Call(op election.Op, rec int) { sl.s.h.Call(sl.i, op, rec) }

func (sl *slotLock) Cancel() { sl.s.h.Cancel(sl.i) }

func (sl *slotLock) Log(level slog.Level, msg string, args ...any) {
	sl.s.h.Log(level, msg, append(args, "slot", sl.i)...)
}

func (sl *slotLock) Granted(t election.Term) { sl.granted, sl.term = true, t }

func (sl *slotLock) Busy(ld election.Leader) { sl.s.seen[sl.i] = ld }

func (sl *slotLock) Refused(err error) { sl.refused = err }

func (sl *slotLock) Publish(d driver.Snapshot) {
	if sl.s.held == sl.i {
		sl.s.h.Publish(d)
	}
}

func (sl *slotLock) Ended(t election.Term, r election.Reason) {
	if sl.s.held == sl.i {
		sl.s.lost = true
		sl.s.h.Ended(t, r)
	}
}

// Reschedule: the semaphore reschedules after every event.
func (sl *slotLock) Reschedule() {}

// WakeNext: a semaphore's slots have no wake-ups.
func (sl *slotLock) WakeNext(string) {}

func (sl *slotLock) Retired() {
	if ld := sl.lk.Leader(); ld.Holder != "" {
		sl.s.seen[sl.i] = ld
	}
	sl.lk = nil
}

// SemRequestsPerHour returns what the callers of a semaphore of n slots
// make per hour at timing t (defaults filled in): a holder renews its slot
// as a lock's holder does; a waiter, one of waiters waiting for a slot,
// reads every slot every poll, or, fair, costs what a fair lock's waiter
// costs (WaiterRequestsPerHour) plus reads of its other n-1 slots, every
// poll at the head of the queue and every GatedPoll behind it. Taking a
// slot costs n+1 reads (n+2 fair) and a write beside.
func SemRequestsPerHour(t election.Timing, n, waiters int, fair bool) (holderWrites, waiterReads, waiterWrites float64) {
	t = t.WithDefaults()
	per := func(d time.Duration) float64 { return float64(time.Hour) / float64(d) }
	holderWrites = per(t.RenewInterval)
	waiters = max(waiters, 1)
	if !fair {
		return holderWrites, float64(n) * per(t.PollInterval), 0
	}
	waiterReads, waiterWrites = WaiterRequestsPerHour(t, waiters)
	head := 1 / float64(waiters)
	waiterReads += float64(n-1) * (head*per(t.PollInterval) + (1-head)*per(election.GatedPoll(t)))
	return holderWrites, waiterReads, waiterWrites
}
