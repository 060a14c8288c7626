package engine

import (
	"errors"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// ErrClosed answers the calls still waiting when a Locker closes.
var ErrClosed = errors.New("tenure: Locker closed")

// Locker is the locks of one process: an Entry per TryLock or Lock call,
// each a lock (lockcore.Lock) or a semaphore's call (lockcore.Sem), run
// on a host.Core. Calls of the process for one name wait in turn, so that
// the store never sees two holders with the process's ID: a TryLock for a
// name the process holds or waits for is refused at once, a Lock waits
// behind. Every method belongs to the host's loop.
type Locker struct {
	core *host.Core
	fx   LockerEffects
	tap  LockerTap // the simulator's; nil but there
	id   string
	wake string // the address a waiting lock publishes; "" for none

	names   map[string]*Entry // per name: the active entry, then (next) those waiting behind it
	live    int               // entries started and not yet retired
	closing bool
}

// LockerEffects is what a Locker's entries tell the process around them,
// and ask of it. Every method runs on the host's loop, within an event.
type LockerEffects interface {
	Now() time.Time
	Log(level slog.Level, msg string, args ...any)
	LockerEvents
}

// LockerEvents are the events of a Locker's entries.
type LockerEvents interface {
	// Granted answers e's caller: it holds the record name (the lock's,
	// or a semaphore's slot's) for term t.
	Granted(e *Entry, name string, t election.Term)
	// Busy answers e's TryLock: the lock is held by ld, or (a semaphore)
	// every slot, by slots[i].
	Busy(e *Entry, ld election.Leader, slots []election.Leader)
	// Refused answers e's caller with err (ErrClosed when the Locker
	// closes first).
	Refused(e *Entry, err error)
	// Published reports what the held term's Machine knows after a step.
	Published(e *Entry, s driver.Snapshot)
	// Ended ends e's held term: the lock is lost, or given back.
	Ended(e *Entry, t election.Term, r election.Reason)
	// Retired says that e is over: nothing more will happen to it.
	Retired(e *Entry)
	// WakeNext sends a wake-up for the lock name to addr; it must not
	// wait on the network.
	WakeNext(name, addr string)
}

// NewLocker returns the Locker of the process id, running its entries on
// core and telling fx. With wake, a waiting lock publishes that address
// for wake-ups (see lockcore.Lock.SetWake).
func NewLocker(core *host.Core, fx LockerEffects, id, wake string) *Locker {
	return &Locker{core: core, fx: fx, id: id, wake: wake, names: map[string]*Entry{}}
}

// Live returns how many entries are started and not yet retired.
func (l *Locker) Live() int { return l.live }

// Closing reports whether Close was called.
func (l *Locker) Closing() bool { return l.closing }

// Active returns the entry that has name in this process (held, or
// trying), or nil.
func (l *Locker) Active(name string) *Entry { return l.names[name] }

// Entry is one call of a Locker: a lock, or a semaphore's call (Slots).
// Its methods but those of lockcore.Host and lockcore.SemHost are for the
// process around it.
type Entry struct {
	lockcore.Lock
	host.Slot
	lk *Locker
	// Owner is the process's, for its own bookkeeping of the call.
	Owner any

	cfg    *election.Config // until the entry starts
	mk     func(cfg *election.Config) lockcore.Machine
	next   *Entry       // the next call of this process waiting for the name
	flight *host.Flight // the call in flight on the lock's record

	// A semaphore (Slots): its calls, and the call on each slot's record.
	sem         *lockcore.Sem
	slots       int
	semCalls    map[*host.Flight]semCall
	slotFlights []*host.Flight

	try     bool
	fair    bool
	keep    bool // OncePer: the lock is never given back
	started bool
	live    bool // started and not yet retired
	held    bool // granted, and not yet ended
	term    election.Term
}

// Call is what an entry's call is, lock or semaphore.
type Call struct {
	Name string
	// Config is the Machines' configuration, validated.
	Config *election.Config
	Try    bool // TryLock: never wait
	Fair   bool // wait in turn with the name's fair waiters
	Keep   bool // OncePer: never give the lock back
	Slots  int  // a semaphore of Slots slots; 0: a lock
	// Machine, if set, makes each lock's Machine instead of election.New:
	// the simulator's baselines, which break the protocol on purpose.
	Machine func(cfg *election.Config) lockcore.Machine
}

// NewEntry returns an entry for c, owned by owner; Add starts it.
func (l *Locker) NewEntry(c Call, owner any) *Entry {
	e := &Entry{lk: l, Owner: owner, cfg: c.Config, mk: c.Machine, try: c.Try, fair: c.Fair, keep: c.Keep, slots: c.Slots}
	e.SetName(c.Name)
	return e
}

// Add takes e's name in this process: a name another call of this
// process holds or waits for is refused (TryLock) or queued behind it
// (Lock).
func (l *Locker) Add(e *Entry) {
	if l.tap != nil {
		l.tap.Added(e)
	}
	if l.closing {
		l.Fail(e, ErrClosed)
		return
	}
	a := l.names[e.Name()]
	if a != nil && e.try {
		if e.Answer() {
			ld := election.Leader{Holder: l.id}
			if a.held {
				ld.Token, ld.Payload = a.term.Token, a.Config().Payload
			}
			l.fx.Busy(e, ld, nil)
		}
		return
	}
	if a == nil {
		l.names[e.Name()] = e
		l.begin(e)
		return
	}
	for a.next != nil {
		a = a.next
	}
	a.next = e
}

// Fail answers e's caller with err, if it has no answer yet.
func (l *Locker) Fail(e *Entry, err error) {
	if e.Answer() {
		l.fx.Refused(e, err)
	}
}

// Stop ends e: the term ends, then the release. An entry still waiting
// in this process just leaves the queue.
func (l *Locker) Stop(e *Entry) {
	if !e.started {
		l.dequeue(e)
		return
	}
	e.call().Stop()
}

// Close refuses every call still waiting (ErrClosed) and stops those
// started; the entries retire as their releases end.
func (l *Locker) Close() {
	l.closing = true
	var active []*Entry
	for _, e := range l.names {
		if e.live {
			active = append(active, e)
		}
		for ; e != nil; e = e.next {
			l.Fail(e, ErrClosed)
		}
	}
	for _, e := range active {
		l.Stop(e)
	}
}

// Woken takes a wake-up for the lock name: the entry of this process that
// waits for it, if any, reads it now (rate-limited). It reports whether
// one did.
func (l *Locker) Woken(name string) bool {
	e := l.names[name]
	if e == nil || !e.live {
		return false
	}
	if l.tap == nil {
		return e.Wake()
	}
	turn := e.sem == nil && e.Turn()
	ok := e.Wake()
	if ok {
		l.tap.Woken(e, turn)
	}
	return ok
}

// Noticed takes an event of the store's change feed for the lock name:
// the entry of this process that waits for it, if any, reads it now
// (lockcore.Lock.Noticed). A semaphore's does not: its slots are records
// of their own.
func (l *Locker) Noticed(name string, ev lease.Event) bool {
	e := l.names[name]
	if e == nil || !e.live || e.sem != nil {
		return false
	}
	return e.Lock.Noticed(ev)
}

// begin starts e.
func (l *Locker) begin(e *Entry) {
	if e.Answered() { // its caller gave up while it waited in this process
		l.dequeue(e)
		return
	}
	if e.slots != 0 {
		e.sem = new(lockcore.Sem)
		var mk func() (lockcore.Machine, error)
		if m := e.mk; m != nil {
			cfg := e.cfg // each slot's Machine is made when first needed
			mk = func() (lockcore.Machine, error) { return m(cfg), nil }
		}
		if err := e.sem.Init((*semHost)(e), e.Name(), e.slots, e.cfg, e.try, e.fair, mk); err != nil {
			l.Fail(e, err) // checked by the caller: not reached
			l.dequeue(e)
			return
		}
		e.cfg, e.mk, e.started, e.live = nil, nil, true, true
		l.live++
		e.sem.Start()
		return
	}
	if e.mk != nil {
		e.InitMachine(e, e.Name(), e.mk(e.cfg), e.try, e.fair)
	} else if err := e.Init(e, e.Name(), e.cfg, e.try, e.fair); err != nil {
		l.Fail(e, err) // validated by the caller: not reached
		l.dequeue(e)
		return
	}
	if e.keep {
		e.Keep()
	}
	if l.wake != "" && !e.keep && lease.ValidateName(e.Name()+lockcore.WakeSuffix) == nil {
		e.SetWake(l.wake) // a name too long for its wake record goes without: polls find it free
	}
	e.cfg, e.mk, e.started, e.live = nil, nil, true, true
	l.live++
	e.Start()
}

func (l *Locker) remove(e *Entry) {
	if e.live {
		e.live = false
		l.live--
	}
	l.core.Remove(e)
	l.dequeue(e)
}

// dequeue drops e from its name's queue and starts the next in line.
func (l *Locker) dequeue(e *Entry) {
	head := l.names[e.Name()]
	if head != e {
		for o := head; o != nil; o = o.next {
			if o.next == e {
				o.next, e.next = e.next, nil
				break
			}
		}
		return // the active entry stays
	}
	next := e.next
	e.next = nil
	if next == nil {
		delete(l.names, e.Name())
		return
	}
	l.names[e.Name()] = next
	if !next.started {
		l.begin(next)
	}
}

// Started reports whether e has begun (it no longer waits behind another
// call of this process).
func (e *Entry) Started() bool { return e.started }

// Live reports whether e is started and not yet retired.
func (e *Entry) Live() bool { return e.live }

// Keeps reports whether e is a OncePer lock, never given back.
func (e *Entry) Keeps() bool { return e.keep }

// Held returns the term e holds, if any.
func (e *Entry) Held() (election.Term, bool) { return e.term, e.held }

// Sem returns e's semaphore call, or nil for a lock.
func (e *Entry) Sem() *lockcore.Sem { return e.sem }

// SlotHeld returns the semaphore's slot held, or -1.
func (e *Entry) SlotHeld() int {
	if e.sem == nil {
		return -1
	}
	return e.sem.Slot()
}

// entryCall is what the Locker asks of an entry's call, whether a lock's
// (lockcore.Lock) or a semaphore's (lockcore.Sem).
type entryCall interface {
	Answer() bool
	Answered() bool
	Stop()
	Err() error
	GaveUp() bool
	Config() *election.Config
	Fire(now time.Time)
	Due() time.Time
}

// call returns the entry's call: its semaphore's, if it has one.
func (e *Entry) call() entryCall {
	if e.sem != nil {
		return e.sem
	}
	return &e.Lock
}

// The entry's methods that differ for a semaphore: they shadow the
// embedded Lock's.

func (e *Entry) Answer() bool             { return e.call().Answer() }
func (e *Entry) Answered() bool           { return e.call().Answered() }
func (e *Entry) Err() error               { return e.call().Err() }
func (e *Entry) GaveUp() bool             { return e.call().GaveUp() }
func (e *Entry) Config() *election.Config { return e.call().Config() }

// Wake: a semaphore has no wake-ups.
func (e *Entry) Wake() bool { return e.sem == nil && e.Lock.Wake() }

// The host.Entry of a lock.

// Due is the entry's next wake-up, none once it is retired.
func (e *Entry) Due() time.Time {
	if !e.live {
		return time.Time{}
	}
	return e.call().Due()
}

func (e *Entry) Fire(now time.Time) { e.call().Fire(now) }

// Which record of the lock a call is on.
const (
	tagLock uint8 = iota
	tagQueue
)

// CallDone takes the outcome of one of the entry's calls.
func (e *Entry) CallDone(f *host.Flight, res election.Result) {
	if e.sem != nil {
		e.semDone(f, res)
		return
	}
	if f == e.flight {
		e.flight = nil // its context is done: let it go
	}
	switch {
	case !e.live:
	case f.Tag() == tagQueue:
		e.QueueResult(res, f.Op().Kind == election.OpPut)
	default:
		e.Result(res)
	}
}

// The lockcore.Host of a lock.

func (e *Entry) Now() time.Time { return e.lk.fx.Now() }

func (e *Entry) Call(op election.Op, rec int) {
	if rec != lockcore.RecLock {
		e.lk.core.Call(e, tagQueue, lockcore.RecordName(e.Name(), rec), op, e.Config().OpTimeout)
		return
	}
	e.flight = e.lk.core.Call(e, tagLock, e.Name(), op, 0) // the Machine times it out
}

// Cancel abandons the lock call in flight, or drops it unstarted.
func (e *Entry) Cancel() {
	e.lk.core.Cancel(e.flight)
	e.flight = nil
}

func (e *Entry) Log(level slog.Level, msg string, args ...any) { e.lk.fx.Log(level, msg, args...) }

func (e *Entry) Granted(t election.Term) { e.grant(e.Name(), t) }

// grant answers the caller with the lock held for term t of the record
// name (a semaphore's slot record, or the lock's).
func (e *Entry) grant(name string, t election.Term) {
	e.held, e.term = true, t
	e.lk.fx.Granted(e, name, t)
}

func (e *Entry) Busy(ld election.Leader) { e.lk.fx.Busy(e, ld, nil) }

func (e *Entry) Refused(err error) { e.lk.fx.Refused(e, err) }

func (e *Entry) Publish(s driver.Snapshot) { e.lk.fx.Published(e, s) }

func (e *Entry) Ended(t election.Term, r election.Reason) {
	e.held = false
	e.lk.fx.Ended(e, t, r)
}

func (e *Entry) Reschedule() { e.lk.core.Fix(e) }

func (e *Entry) WakeNext(addr string) { e.lk.fx.WakeNext(e.Name(), addr) }

func (e *Entry) Retired() {
	e.held = false
	e.lk.remove(e)
	e.lk.fx.Retired(e)
}

// semCall is a semaphore's store call in flight: its slot and record.
type semCall struct{ slot, rec int }

// semHost is a semaphore entry's lockcore.SemHost.
type semHost Entry

func (s *semHost) e() *Entry { return (*Entry)(s) }

func (s *semHost) Now() time.Time { return s.lk.fx.Now() }

func (s *semHost) Call(slot int, op election.Op, rec int) {
	e := s.e()
	name := lockcore.SemRecordName(e.Name(), slot, rec)
	if s.semCalls == nil {
		s.semCalls = map[*host.Flight]semCall{}
		s.slotFlights = make([]*host.Flight, s.slots)
	}
	var f *host.Flight
	if rec == lockcore.RecLock {
		f = s.lk.core.Call(e, tagLock, name, op, 0) // the slot's Machine times it out
		s.slotFlights[slot] = f
	} else {
		f = s.lk.core.Call(e, tagQueue, name, op, e.Config().OpTimeout)
	}
	s.semCalls[f] = semCall{slot, rec}
}

func (s *semHost) Cancel(slot int) {
	if f := s.slotFlights[slot]; f != nil {
		s.lk.core.Cancel(f)
		s.slotFlights[slot] = nil
	}
}

// semDone takes the outcome of one of a semaphore's calls. A slot's call
// cancelled by its lock is not passed on: the lock may be another by now.
func (e *Entry) semDone(f *host.Flight, res election.Result) {
	c, ok := e.semCalls[f]
	delete(e.semCalls, f)
	if !ok || !e.live {
		return
	}
	if c.rec == lockcore.RecLock {
		if e.slotFlights[c.slot] != f {
			return
		}
		e.slotFlights[c.slot] = nil
	}
	e.sem.Result(c.slot, c.rec, res, f.Op().Kind == election.OpPut)
}

func (s *semHost) Log(level slog.Level, msg string, args ...any) { s.e().Log(level, msg, args...) }

func (s *semHost) Granted(slot int, t election.Term) {
	e := s.e()
	e.grant(lockcore.SlotName(e.Name(), slot), t)
}

func (s *semHost) Busy(ls []election.Leader) { s.lk.fx.Busy(s.e(), election.Leader{}, ls) }

func (s *semHost) Refused(err error) { s.e().Refused(err) }

func (s *semHost) Publish(d driver.Snapshot) { s.e().Publish(d) }

func (s *semHost) Ended(t election.Term, r election.Reason) { s.e().Ended(t, r) }

func (s *semHost) Reschedule() { s.e().Reschedule() }

func (s *semHost) Retired() { s.e().Retired() }
