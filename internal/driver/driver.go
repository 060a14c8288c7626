// Package driver carries out the decisions of an election.Machine: it turns
// each Output into store calls, a wake-up timer, callbacks and barriers,
// through a small Effects interface, and feeds the Machine the results. It
// starts no goroutines and reads no clock but through Effects, so the same
// code runs a tenure.Candidate (goroutines, the real clock) and the
// simulator's fast tier (one thread, a virtual clock): a change here cannot
// make the two disagree.
//
// A Driver is not safe for concurrent use: one goroutine (or the
// simulator's scheduler) calls it, one event at a time.
package driver

import (
	"errors"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// Machine is the decision logic a Driver runs: *election.Machine, or a
// simulator's baseline.
type Machine interface {
	Start(now time.Time) election.Output
	Tick(now time.Time) election.Output
	Done(now time.Time, res election.Result) election.Output
	Stop(now time.Time) election.Output
	Release(now time.Time) election.Output
	CallbacksDone(now time.Time) election.Output
	Leader() election.Leader
	Term() (election.Term, bool)
	Err() error
}

// Barrier names a point in the callback queue that the Driver waits for.
type Barrier uint8

const (
	// Held follows the callbacks of a term that ended: until it is
	// reached, the Machine does not campaign.
	Held Barrier = iota + 1
	// Drained follows every callback queued before the stop: the release
	// goes out only once it is reached.
	Drained
)

// Effects is what a Driver asks of the runtime around it. The Driver calls
// them from the goroutine that calls it, in the order listed within one
// step: Cancel, Send, Publish, the events in order (Elected, Demoted and
// their Barrier, Anomaly), LeaderChanged with the latest leader, Wake.
type Effects interface {
	// Now reads the clock that the Machine's times come from.
	Now() time.Time
	// Send starts a store call; its outcome comes back through
	// Driver.Result.
	Send(op election.Op)
	// Cancel abandons the call in flight: its result will be ignored.
	Cancel(id uint64)
	// Wake arranges for Driver.Tick at the given instant, replacing any
	// earlier wake-up; the zero time cancels it. It is called only when
	// the instant changes.
	Wake(at time.Time)
	// ReleaseTimer arranges for Driver.GiveUp once d has passed.
	ReleaseTimer(d time.Duration)
	// Publish reports what the Machine knows now, before any callback of
	// this step is queued. It is called after the first step, and after
	// every step whose Output is not Unchanged.
	Publish(s Snapshot)
	// Elected begins a term: make its context and queue OnElected.
	Elected(t election.Term)
	// Demoted ends the current term: cancel its context, then queue
	// OnDemoted.
	Demoted(t election.Term, r election.Reason)
	// LeaderChanged reports the observed leader, at most once a step.
	LeaderChanged(l election.Leader)
	// Anomaly reports a misbehaving store or a duplicate ID, to log.
	Anomaly(err error)
	// Barrier queues b behind the callbacks queued so far; Driver.Reached
	// is called once they have all returned.
	Barrier(b Barrier)
}

// Snapshot is what the Machine knows after a step.
type Snapshot struct {
	Leader  election.Leader
	Term    election.Term // while Leading
	Leading bool
	Err     error
	// Short, while Leading: the term's deadline is nearer than a call's
	// OpTimeout, so a renewal sent now may not be answered before it (a
	// term confirmed late, by a read-back after a lost answer). Jeopardy
	// takes it as a failing renewal.
	Short bool
	// LeaderUntil is when Leader's term is no longer known to be live, by
	// the Machine's clock (election.Machine.LeaderUntil); zero if the
	// Machine cannot tell.
	LeaderUntil time.Time
	// Version, while Leading, is the version of the term's last write known
	// to have applied (election.Machine.OwnVersion), for renewal notices;
	// NoVersion if the Machine cannot tell.
	Version lease.Version
}

// Driver runs one Machine until it is done.
type Driver struct {
	m       Machine
	fx      Effects
	release time.Duration // bound on the release after Drained

	op      uint64     // the call in flight
	wake    time.Time  // the wake-up asked of Effects, if wakeSet
	ended   time.Time  // when the last term ended
	reached [2]Barrier // reached during a step, to take after it; Held and Drained at most once each

	// The flags, together: a Driver per held lock adds up.
	wakeSet  bool
	answered bool // a read has been answered
	created  bool // a write of a new record (lease.NoVersion) has been answered
	updated  bool // a write over a version has been answered
	opPut    bool // the call in flight (op) is a write
	opNew    bool // and of a new record
	stopping bool
	held     bool // a Held barrier is pending
	applying bool // inside step: a barrier reached now waits for its end
	done     bool
	gaveUp   bool
	keep     bool // Stop gives nothing back (Keep)
}

// New returns a Driver for m. release bounds the release after Stop (the
// Candidate's ReleaseTimeout).
func New(m Machine, fx Effects, release time.Duration) *Driver {
	d := new(Driver)
	d.Init(m, fx, release)
	return d
}

// Init makes d a new Driver for m, as New does, in place: for a Driver held
// by value (one per lock of a Locker).
func (d *Driver) Init(m Machine, fx Effects, release time.Duration) {
	*d = Driver{m: m, fx: fx, release: release}
}

// Wake returns the wake-up last asked of Effects.Wake; zero if none.
func (d *Driver) Wake() time.Time {
	if !d.wakeSet {
		return time.Time{}
	}
	return d.wake
}

// Start begins campaigning.
func (d *Driver) Start() { d.step(d.m.Start(d.fx.Now())) }

// Tick is the wake-up Effects.Wake arranged.
func (d *Driver) Tick() {
	d.wakeSet = false
	d.step(d.m.Tick(d.fx.Now()))
}

// Result reports the outcome of a store call. It returns the error when a
// call fails with an error that retrying cannot cure (lease.ErrPermanent: a
// missing table, access denied, a read-only disk; or
// lease.ErrInvalidRecord: a record that no one can decode) before a call of
// that kind was ever answered in this run: the caller should give up at
// once, since a store that never worked is misconfigured, while one that
// worked may be mended by an operator and is retried. The kinds are a read,
// a write of a new record and a write over a version, since stores grant
// them apart (Kubernetes' create and update verbs, PostgreSQL's INSERT and
// UPDATE): a candidate allowed to create a lease but not to renew it fails
// at its first renewal.
func (d *Driver) Result(res election.Result) error {
	write := d.opPut && res.ID == d.op
	kindProven := d.answered
	if write {
		kindProven = d.updated
		if d.opNew {
			kindProven = d.created
		}
	}
	if !kindProven {
		switch {
		case res.Err != nil && (errors.Is(res.Err, lease.ErrPermanent) || errors.Is(res.Err, lease.ErrInvalidRecord)):
			d.done = true
			return res.Err
		case res.Err == nil || errors.Is(res.Err, lease.ErrNotFound) || errors.Is(res.Err, lease.ErrConflict):
			d.answered = true
			switch {
			case !write:
			case d.opNew:
				d.created = true
			default:
				d.updated = true
			}
		}
	}
	d.step(d.m.Done(d.fx.Now(), res))
	return nil
}

// Stop ends campaigning: the term ends, and once the callbacks queued so far
// have returned (Drained) the lease is released. A second call does nothing.
func (d *Driver) Stop() {
	if d.stopping || d.done {
		return
	}
	d.stopping, d.held = true, false // no campaign now: only the release waits
	d.step(d.m.Stop(d.fx.Now()))
	d.fx.Barrier(Drained)
}

// Keep makes Stop give nothing back: the run ends once the term's
// callbacks returned, with the record as last written, so that others wait
// out its lease. A once-per lock keeps its slot taken this way. Call it
// before Start.
func (d *Driver) Keep() { d.keep = true }

// resigner is a Machine that can resign (election.Machine).
type resigner interface {
	Resign(now time.Time, holdOff time.Duration) election.Output
	HandOver(now time.Time, holdOff time.Duration) election.Output
	Resigning() bool
}

// Resign ends the term, gives the lease back once its callbacks returned,
// and keeps campaigning only after holdOff. It does nothing for a Machine
// that cannot resign, or once stopping.
func (d *Driver) Resign(holdOff time.Duration) {
	if r, ok := d.m.(resigner); ok && !d.stopping && !d.done {
		d.step(r.Resign(d.fx.Now(), holdOff))
	}
}

// HandOver is Resign for a live candidate of higher priority: the term
// ends with ReasonHandedOver, and the lease, if still free once holdOff is
// over, is taken back.
func (d *Driver) HandOver(holdOff time.Duration) {
	if r, ok := d.m.(resigner); ok && !d.stopping && !d.done {
		d.step(r.HandOver(d.fx.Now(), holdOff))
	}
}

// Gate holds the Machine's campaigning back, or lets it go on (a fair
// lock's turn). It does nothing for a Machine without a gate.
func (d *Driver) Gate(closed bool) {
	if g, ok := d.m.(interface {
		Gate(now time.Time, closed bool) election.Output
	}); ok && !d.done {
		d.step(g.Gate(d.fx.Now(), closed))
	}
}

// SetCold makes the Machine poll at the cold cadence, or the hot one (a
// standby's). It does nothing for a Machine without one.
func (d *Driver) SetCold(cold bool) {
	if c, ok := d.m.(interface {
		SetCold(now time.Time, cold bool) election.Output
	}); ok && !d.done {
		d.step(c.SetCold(d.fx.Now(), cold))
	}
}

// Hint passes on a wake-up: the lease may have changed, read it now. It
// does nothing for a Machine that takes no hints.
func (d *Driver) Hint() {
	if w, ok := d.m.(interface {
		Wake(now time.Time) election.Output
	}); ok && !d.done {
		d.step(w.Wake(d.fx.Now()))
	}
}

// Notice passes on a renewal notice: the leader has just renewed (writing
// version v, or NoVersion where the notice does not say), read the lease
// now (a standby). It does nothing for a Machine that takes none.
func (d *Driver) Notice(v lease.Version) {
	if n, ok := d.m.(interface {
		Notice(now time.Time, v lease.Version) election.Output
	}); ok && !d.done {
		d.step(n.Notice(d.fx.Now(), v))
	}
}

// NoticeRecord passes on a renewal the store's change feed told of with
// its record (election.Machine.NoticeRecord); a Machine that takes none
// gets it as a notice of v.
func (d *Driver) NoticeRecord(v lease.Version, rec lease.Record) {
	if n, ok := d.m.(interface {
		NoticeRecord(now time.Time, v lease.Version, rec lease.Record) election.Output
	}); ok && !d.done {
		d.step(n.NoticeRecord(d.fx.Now(), v, rec))
		return
	}
	d.Notice(v)
}

// Resigning reports whether a Resign has yet to give the lease back.
func (d *Driver) Resigning() bool {
	r, ok := d.m.(resigner)
	return ok && !d.done && r.Resigning()
}

// Stopping reports whether Stop was called.
func (d *Driver) Stopping() bool { return d.stopping }

// Reached reports that a barrier was reached: every callback queued before
// it has returned. A barrier reached while the Driver is in a step (the
// simulator runs callbacks synchronously) is taken once the step is over,
// as a goroutine running the Driver would.
func (d *Driver) Reached(b Barrier) {
	if d.applying {
		// Once each is enough: a second Held within the step follows the
		// same callbacks, and Stop queues Drained once.
		for i, r := range d.reached {
			if r == b {
				return
			}
			if r == 0 {
				d.reached[i] = b
				return
			}
		}
		return // not reached: there are two kinds
	}
	d.take(b)
}

func (d *Driver) take(b Barrier) {
	switch {
	case d.done:
	case b == Held && d.held && !d.stopping:
		d.held = false
		d.step(d.m.CallbacksDone(d.fx.Now()))
	case b == Drained && d.keep:
		d.done = true
	case b == Drained:
		d.fx.ReleaseTimer(d.release)
		d.step(d.m.Release(d.fx.Now()))
	}
}

// GiveUp is the end of the release timer: the release was not confirmed.
func (d *Driver) GiveUp() {
	if !d.done {
		d.done, d.gaveUp = true, true
	}
}

// Machine returns the Machine the Driver runs.
func (d *Driver) Machine() Machine { return d.m }

// Done reports whether the run is over: released, given up, or failed at
// the start.
func (d *Driver) Done() bool { return d.done }

// GaveUp reports whether the release timer ended the run.
func (d *Driver) GaveUp() bool { return d.gaveUp }

// Held reports whether a term's callbacks are still running since the term
// ended at the returned instant: the Machine does not campaign meanwhile.
func (d *Driver) Held() (time.Time, bool) { return d.ended, d.held }

// step carries out an Output.
func (d *Driver) step(out election.Output) {
	d.applying = true
	if out.Abandon != 0 && out.Abandon == d.op {
		d.fx.Cancel(d.op)
	}
	if out.Op != nil {
		d.op, d.opPut = out.Op.ID, out.Op.Kind == election.OpPut
		d.opNew = d.opPut && out.Op.Expect == lease.NoVersion
		d.fx.Send(*out.Op)
	}
	var s Snapshot
	if !out.Unchanged {
		s = Snapshot{Leader: d.m.Leader(), Err: d.m.Err()}
		if u, ok := d.m.(interface{ LeaderUntil() time.Time }); ok {
			s.LeaderUntil = u.LeaderUntil()
		}
		s.Term, s.Leading = d.m.Term()
		if v, ok := d.m.(interface{ OwnVersion() lease.Version }); ok && s.Leading {
			s.Version = v.OwnVersion()
		}
		if c, ok := d.m.(interface{ Config() *election.Config }); ok && s.Leading {
			s.Short = s.Term.Deadline.Sub(d.fx.Now()) < c.Config().OpTimeout
		}
		d.fx.Publish(s)
	}
	var leader *election.Leader
	for i := range out.Events {
		e := &out.Events[i] // not a copy: a copy whose field is kept escapes, one allocation per event
		switch e.Kind {
		case election.EventElected:
			d.fx.Elected(e.Term)
			if s.Short {
				d.fx.Publish(s) // again, now that the term is known: it begins in jeopardy
			}
		case election.EventDemoted:
			d.fx.Demoted(e.Term, e.Reason)
			if !d.stopping {
				d.ended, d.held = d.fx.Now(), true
				d.fx.Barrier(Held)
			}
		case election.EventLeaderChanged:
			leader = &e.Leader // only the latest is reported
		case election.EventAnomaly:
			d.fx.Anomaly(e.Err)
		}
	}
	if leader != nil {
		d.fx.LeaderChanged(*leader)
	}
	if out.Done {
		d.done = true
	}
	switch {
	case out.Wake.IsZero() || d.done:
		if d.wakeSet {
			d.wakeSet = false
			d.fx.Wake(time.Time{})
		}
	case !d.wakeSet || !out.Wake.Equal(d.wake):
		d.wake, d.wakeSet = out.Wake, true
		d.fx.Wake(out.Wake)
	}
	d.applying = false
	for d.reached[0] != 0 {
		b := d.reached[0]
		d.reached = [2]Barrier{d.reached[1]}
		d.take(b)
	}
}
