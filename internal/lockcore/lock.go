// Package lockcore is one lock of a tenure.Locker without the goroutines:
// an election.Machine under the shared driver (internal/driver), the rules
// that make a campaign a lock (give up at the first holder for TryLock, never
// take the lock again once the term ended), fair waiting in the lock's
// queue, wake-ups, and semaphores (Sem: n slots, each a Lock). A Host carries out what it asks (store calls, answers to the
// caller) and calls it back one event at a time, so the same code runs in
// the Locker's loop and in the simulator's fast tier.
package lockcore

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
)

// Host is what a Lock asks of the runtime around it. The Lock calls it from
// the goroutine that calls the Lock.
type Host interface {
	// Now reads the clock that the Machine's times come from.
	Now() time.Time
	// Call starts a store call on record rec of the lock (RecordName):
	// RecLock, whose answer comes back through Result, or one of its fair
	// queue's or its wake record (RecWake), whose answer comes back through
	// QueueResult. Those calls are one at a time; each must be answered within the lock's OpTimeout, with an error if need
	// be, and the answer to a write carries the record written.
	Call(op election.Op, rec int)
	// Cancel abandons the call in flight on the lock's record.
	Cancel()
	Log(level slog.Level, msg string, args ...any)

	// Granted answers the caller: the lock is held, for term t.
	Granted(t election.Term)
	// Busy answers a TryLock: l holds the lock.
	Busy(l election.Leader)
	// Refused answers the caller with err.
	Refused(err error)
	// Publish reports what the Machine knows after a step
	// (driver.Effects.Publish): a held term's deadline moves with it.
	Publish(s driver.Snapshot)
	// Ended ends the held term: the lock is lost, or given back.
	Ended(t election.Term, r election.Reason)
	// Reschedule says that Due may have changed.
	Reschedule()
	// WakeNext sends a wake-up for the lock to addr (SetWake): the lock was
	// given back, confirmed, or the head of its queue left it. It must not
	// wait on the network.
	WakeNext(addr string)
	// Retired says that the lock is over: nothing more will happen.
	Retired()
}

// Lock is one lock. The zero Lock is unusable: call Init.
type Lock struct {
	h    Host
	name string
	d    driver.Driver // runs a Machine
	fair *fairState    // nil unless Fair
	wk   *wakeState    // nil unless SetWake
	// feedLimit: the release events of a change feed read at most as
	// often as wake-ups (Noticed), without SetWake.
	feedLimit WakeLimit
	giveUp    time.Time // the driver's release timer; its wake-up is d.Wake

	try        bool // TryLock: give up at the first sight of a holder
	gateClosed bool // another lock's turn holds this one back (setGate)
	answered   bool
	held       bool // a term began and has not ended
	stopping   bool // stop the driver once its current step is over
	lost       bool // the term ended: a lock is not taken again by itself
	retired    bool

	// HoldBarriers: the host runs callbacks for the term, and the
	// driver's barriers wait for them (Returned).
	holdBarriers bool
	// deferLeave: a fair lock keeps its place in the queue once granted,
	// until LeaveQueue (the semaphore confirms a grant first).
	deferLeave bool
	cbOut      bool             // a term was granted and its callbacks have not returned
	barriers   []driver.Barrier // reached once they have
}

// Init makes l a lock on name for h, with a Machine for cfg (which it
// keeps: it must not change, and locks may share it); an answer
// already claimed stays claimed. A TryLock
// (try) gives up as soon as it sees a holder; a fair lock (not try) waits
// its turn in the lock's queue.
func (l *Lock) Init(h Host, name string, cfg *election.Config, try, fair bool) error {
	m, err := election.NewShared(cfg)
	if err != nil {
		return err
	}
	l.InitMachine(h, name, m, try, fair)
	return nil
}

// Machine is the decision logic a Lock runs: *election.Machine, or a
// simulator's baseline. Fair waiting needs its Gate (driver.Driver.Gate).
type Machine interface {
	driver.Machine
	Config() *election.Config
}

// InitMachine is Init with a Machine made by the caller.
func (l *Lock) InitMachine(h Host, name string, m Machine, try, fair bool) {
	*l = Lock{h: h, name: name, try: try, answered: l.answered, wk: l.wk}
	l.d.Init(m, (*effects)(l), m.Config().ReleaseTimeout)
	if fair && !try { // TryLock never waits, so it never queues
		l.fair = &fairState{pos: -1, beatPos: -1}
		if l.wk != nil {
			l.fair.addr = l.wk.addr
		}
	}
}

// HoldBarriers makes the lock wait, once a term was granted, for the host
// to say that the term's callbacks have returned (Returned) before it
// releases the lock: a group's shard is handed over only once its work
// stopped. Call it before Start.
func (l *Lock) HoldBarriers() { l.holdBarriers = true }

// DeferLeave makes a fair lock keep its entry in the queue once granted,
// until LeaveQueue or its end: a semaphore whose grant is confirmed by a
// read holds its turn meanwhile, so that no later ticket is served first.
func (l *Lock) DeferLeave() { l.deferLeave = true }

// LeaveQueue drops a granted fair lock's entry (DeferLeave).
func (l *Lock) LeaveQueue() { l.leaveQueue() }

// Returned says that the callbacks of the granted term have returned, the
// term having ended: the lock goes on to its release.
func (l *Lock) Returned() {
	if !l.cbOut {
		return
	}
	l.cbOut = false
	bs := l.barriers
	l.barriers = nil
	for _, b := range bs {
		l.d.Reached(b)
	}
	l.after()
}

// Poke makes a waiting lock read its record now: someone said that it
// was released. The caller rate-limits it. It reports whether the lock
// was waiting.
func (l *Lock) Poke() bool {
	if l.held || l.answered || l.retired || l.stopping || l.lost {
		return false
	}
	l.d.Hint()
	l.after()
	return true
}

// Keep makes the lock give nothing back when it ends (a once-per slot
// stays taken until its lease runs out). Call it before Start.
func (l *Lock) Keep() { l.d.Keep() }

// Start begins campaigning for the lock (in turn, if fair; once its gate
// opens, if shut by setGate).
func (l *Lock) Start() {
	if l.fair != nil || l.gateClosed {
		l.d.Gate(true)
	}
	if l.fair != nil {
		l.fair.next = l.h.Now()
	}
	l.d.Start()
	l.after()
}

// setGate holds a plain lock back (closed) or lets it campaign, for a lock
// whose turn another decides: a semaphore's slot follows slot 0's turn in
// the queue. Before Start it only says how the lock starts.
func (l *Lock) setGate(closed bool, started bool) {
	if l.gateClosed == closed {
		return
	}
	l.gateClosed = closed
	if started {
		l.d.Gate(closed)
		l.after()
	}
}

// Result takes the answer of a call on the lock's record.
func (l *Lock) Result(r election.Result) {
	if err := l.d.Result(r); err != nil { // permanent, before a call of its kind ever worked
		l.refuse(fmt.Errorf("tenure: lock %q: %w", l.name, err))
	}
	l.after()
}

// Fire runs whichever of the lock's timers is due at now.
func (l *Lock) Fire(now time.Time) {
	switch {
	case !l.gateDue().IsZero() && !now.Before(l.gateDue()):
		l.gate(now)
	case l.fair != nil && !l.fair.next.IsZero() && !now.Before(l.fair.next):
		l.queueStep()
	case !l.giveUp.IsZero() && !now.Before(l.giveUp):
		l.giveUp = time.Time{}
		l.d.GiveUp()
	case !l.d.Wake().IsZero() && !now.Before(l.d.Wake()):
		l.d.Tick()
	}
	l.after()
}

// Due returns the instant of the lock's next timer; zero if none.
func (l *Lock) Due() time.Time {
	d := l.d.Wake()
	for _, t := range [4]time.Time{l.giveUp, l.queueNext(), l.gateDue(), l.wakeDue()} {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

func (l *Lock) queueNext() time.Time {
	if l.fair == nil {
		return time.Time{}
	}
	return l.fair.next
}

// Stop ends the lock: the term ends, then the lease is released (owner-
// checked), within the ReleaseTimeout.
func (l *Lock) Stop() {
	if l.held && l.wk != nil {
		l.wk.unlock = true // whom to wake, read beside the release
	}
	l.d.Stop()
	l.after()
}

// Answer claims the one answer to the caller: true the first time. The
// host calls it before answering on its own (the caller gave up, the
// Locker closes); the Lock calls it before Granted, Busy and Refused.
func (l *Lock) Answer() bool {
	if l.answered {
		return false
	}
	l.answered = true
	return true
}

// Answered reports whether the caller has had its answer.
func (l *Lock) Answered() bool { return l.answered }

// Ticket returns a fair waiter's ticket while the queue's index, as it last
// read or wrote it, holds its entry, and 0 otherwise.
func (l *Lock) Ticket() uint64 {
	f := l.fair
	if f == nil || f.gone || f.leaving || !f.idxKnown || f.ticket == 0 || f.index(f.ticket) < 0 {
		return 0
	}
	return f.ticket
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// SetName names a lock not yet started, for a host that keeps it before
// Init (Init names it again).
func (l *Lock) SetName(name string) { l.name = name }

// Config returns the lock's Machine configuration; it must not be changed.
func (l *Lock) Config() *election.Config { return l.machine().Config() }

func (l *Lock) machine() Machine { return l.d.Machine().(Machine) }

// Held reports whether a term is under way.
func (l *Lock) Held() bool { return l.held }

// GaveUp reports whether the release went unconfirmed: the release timer
// ran out. Err then says what the store last answered.
func (l *Lock) GaveUp() bool { return l.d.GaveUp() }

// Leader returns the holder last seen in the store, if any.
func (l *Lock) Leader() election.Leader { return l.machine().Leader() }

// Err returns the Machine's last store error, or nil.
func (l *Lock) Err() error { return l.d.Machine().Err() }

func (l *Lock) refuse(err error) {
	if l.Answer() {
		l.h.Refused(err)
	}
	l.stopping = true
}

// after runs once a driver call has returned: it carries out what the
// effects deferred, and retires the lock once its driver is done and its
// queue entry gone.
func (l *Lock) after() {
	if l.retired {
		return
	}
	if f := l.fair; f != nil && f.gone && !f.inFlight {
		// Out of the queue for good, with no call on it in flight: the
		// lock goes on as an unfair one would, without the queue's state.
		l.fair = nil
	}
	if (l.stopping || l.lost) && !l.d.Stopping() {
		l.stopping = false
		l.d.Stop()
	}
	l.wakeStep()
	if !l.d.Done() {
		l.h.Reschedule()
		return
	}
	if f := l.fair; f != nil && !f.gone {
		l.leaveQueue() // the lock is over: drop our entry, then retire
		l.h.Reschedule()
		return
	}
	if l.wakeBusy() { // its answer comes within OpTimeout
		l.h.Reschedule()
		return
	}
	if addr, id := l.wakeTarget(); addr != "" && !l.d.GaveUp() {
		l.h.Log(slog.LevelDebug, "waking the next waiter", "lock", l.name, "waiter", id, "addr", addr)
		l.h.WakeNext(addr)
	}
	l.retired = true
	l.giveUp = time.Time{}
	l.h.Reschedule()
	l.h.Retired()
}

// effects is the lock's driver.Effects, kept off Lock's method set.
type effects Lock

func (e *effects) Now() time.Time { return e.h.Now() }

func (e *effects) Send(op election.Op) { e.h.Call(op, RecLock) }

func (e *effects) Cancel(uint64) { e.h.Cancel() }

// Wake: Due reads the wake-up off the driver.
func (e *effects) Wake(time.Time) {}

func (e *effects) ReleaseTimer(d time.Duration) { e.giveUp = e.h.Now().Add(d) }

func (e *effects) Publish(s driver.Snapshot) {
	e.h.Publish(s)
	if e.try && !e.answered && s.Err != nil && !s.Leading {
		(*Lock)(e).refuse(fmt.Errorf("tenure: lock %q: %w", e.name, s.Err)) // TryLock does not wait out a failing store
	}
}

func (e *effects) Elected(t election.Term) {
	l := (*Lock)(e)
	l.held = true
	if !l.deferLeave {
		l.leaveQueue()
	}
	if !l.Answer() { // the caller gave up meanwhile: give it back
		l.stopping = true
		return
	}
	l.cbOut = l.holdBarriers
	l.h.Granted(t)
}

func (e *effects) Demoted(t election.Term, r election.Reason) {
	if e.held {
		e.held = false
		e.h.Ended(t, r)
	}
	e.lost = true
}

// LeaderChanged: for TryLock, any holder but this lock itself refuses it,
// the lock's own ID included (a record left by an earlier process with it).
func (e *effects) LeaderChanged(ld election.Leader) {
	if e.try && !e.answered && ld.Holder != "" && !e.held {
		e.answered = true
		e.h.Busy(ld)
		e.stopping = true
	}
}

func (e *effects) Anomaly(err error) {
	e.h.Log(slog.LevelError, "lease anomaly", "lock", e.name, "err", err)
}

// Barrier: a Locker's locks have no callbacks, so every barrier is
// reached at once; a lock that holds its barriers (HoldBarriers) reaches
// them once its term's callbacks have returned.
func (e *effects) Barrier(b driver.Barrier) {
	if e.cbOut {
		e.barriers = append(e.barriers, b)
		return
	}
	e.d.Reached(b)
}
