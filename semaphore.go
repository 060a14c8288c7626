package tenure

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// Slots makes TryLock, Lock and Do take one of n slots of the name, a
// semaphore: at most n callers hold the name at once, each a slot
// (Lock.Slot) with that slot's fencing token. Every caller of the name
// must ask for the same n: the first fixes it in the record NAME::slots,
// and a caller asking for another is refused (ErrSlotsMismatch). A
// TryLock finding every slot held returns a *LockedError listing the
// holders (Holders). A Lock waits on every slot at once, so that a waiter
// reads n records a poll; with Fair, the name's queue orders the waiters
// across all slots. One Locker holds at most one slot of a name at a time:
// its calls for the same name wait in turn, as for a lock. n is 1 to
// MaxSlots; see docs/locks.md, "Semaphores".
func Slots(n int) LockOption { return func(o *lockOptions) { o.slots, o.sem = n, true } }

// MaxSlots is the most slots a semaphore may have.
const MaxSlots = lockcore.MaxSlots

// ErrSlotsMismatch is wrapped by the error of a call with Slots(n) on a
// name whose holders use another number of slots.
var ErrSlotsMismatch = lockcore.ErrSlotsMismatch

// SlotHolder is the holder of one slot of a semaphore, as last seen.
type SlotHolder struct {
	Slot int
	// Leader is the slot's holder as last seen: Holder "" when free, or
	// not known.
	Leader
}

// checkSlots refuses options that do not go with Slots, and a name too
// long for its semaphore's records.
func checkSlots(name string, o lockOptions, try bool) error {
	switch {
	case o.slots < 1 || o.slots > MaxSlots:
		return fmt.Errorf("tenure: lock %q: Slots(%d): a semaphore has 1 to %d slots", name, o.slots, MaxSlots)
	case o.every != 0:
		return fmt.Errorf("tenure: lock %q: OncePer and Slots do not go together", name)
	}
	longest := lockcore.LongestSemName(name, o.slots, o.fair && !try)
	if err := lease.ValidateName(longest); err != nil {
		return fmt.Errorf("tenure: lock %q: too long for a semaphore of %d slots, whose records are named up to %q: %w", name, o.slots, longest, err)
	}
	return nil
}

// slotHolders lists a semaphore's holders.
func slotHolders(ls []election.Leader) []SlotHolder {
	hs := make([]SlotHolder, len(ls))
	for i, ld := range ls {
		hs[i] = SlotHolder{Slot: i, Leader: ld}
	}
	return hs
}

// lockedBySlots is the LockedError of a semaphore whose slots are held by
// ls.
func lockedBySlots(name string, ls []election.Leader, err error) *LockedError {
	le := &LockedError{Name: name, Holders: slotHolders(ls), Err: err}
	for _, h := range le.Holders {
		if h.Holder != "" {
			le.Holder, le.Token, le.Payload = h.Holder, h.Token, h.Payload
			break
		}
	}
	return le
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
func (e *lockEntry) call() entryCall {
	if e.sem != nil {
		return e.sem
	}
	return &e.Lock
}

// The entry's methods that differ for a semaphore: they shadow the
// embedded Lock's.

func (e *lockEntry) Answer() bool             { return e.call().Answer() }
func (e *lockEntry) Answered() bool           { return e.call().Answered() }
func (e *lockEntry) Stop()                    { e.call().Stop() }
func (e *lockEntry) Err() error               { return e.call().Err() }
func (e *lockEntry) GaveUp() bool             { return e.call().GaveUp() }
func (e *lockEntry) Config() *election.Config { return e.call().Config() }
func (e *lockEntry) Fire(now time.Time)       { e.call().Fire(now) }

// Wake: a semaphore has no wake-ups.
func (e *lockEntry) Wake() bool { return e.sem == nil && e.Lock.Wake() }

// slot returns the semaphore's slot held, or -1.
func (e *lockEntry) slot() int {
	if e.sem == nil {
		return -1
	}
	return e.sem.Slot()
}

// semCall is a semaphore's store call in flight: its slot and record.
type semCall struct{ slot, rec int }

// semHost is a semaphore entry's lockcore.SemHost.
type semHost lockEntry

func (s *semHost) e() *lockEntry { return (*lockEntry)(s) }

func (s *semHost) Now() time.Time { return s.l.cfg.Clock.Now() }

func (s *semHost) Call(slot int, op election.Op, rec int) {
	e := s.e()
	name := lockcore.SemRecordName(e.Name(), slot, rec)
	if s.semCalls == nil {
		s.semCalls = map[*host.Flight]semCall{}
		s.slotFlights = make([]*host.Flight, s.slots)
	}
	var f *host.Flight
	if rec == lockcore.RecLock {
		f = s.l.h.Call(e, tagLock, name, op, 0) // the slot's Machine times it out
		s.slotFlights[slot] = f
	} else {
		f = s.l.h.Call(e, tagQueue, name, op, e.Config().OpTimeout)
	}
	s.semCalls[f] = semCall{slot, rec}
}

func (s *semHost) Cancel(slot int) {
	if f := s.slotFlights[slot]; f != nil {
		s.l.h.Cancel(f)
		s.slotFlights[slot] = nil
	}
}

// semDone takes the outcome of one of a semaphore's calls. A slot's call
// cancelled by its lock is not passed on: the lock may be another by now.
func (e *lockEntry) semDone(f *host.Flight, res election.Result) {
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

func (s *semHost) Busy(ls []election.Leader) {
	e := s.e()
	e.answer(takeResult{err: lockedBySlots(e.Name(), ls, nil)})
}

func (s *semHost) Refused(err error) { s.e().Refused(err) }

func (s *semHost) Publish(d driver.Snapshot) { s.e().Publish(d) }

func (s *semHost) Ended(t election.Term, r election.Reason) { s.e().Ended(t, r) }

func (s *semHost) Reschedule() { s.e().Reschedule() }

func (s *semHost) Retired() { s.e().Retired() }
