package engine

import (
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/host"
)

// Tapped is a lease.Store that watches the Lockers and group members run
// on it: the
// simulator's, whose checker sees each entry's events on the loop, as they
// happen, and traces them as it does for the entries it steps itself.
// Only this module can name the type, so no other store is one.
type Tapped interface {
	TapLocker() LockerTap
	TapMember() MemberTap
}

// LockerTap watches a Locker's entries: their effects, each before the
// process has it; each answer of their calls, before the entry has it; and
// each wake-up taken, with whether the lock was its waiter's turn before.
type LockerTap interface {
	LockerEvents
	Added(e *Entry)
	Answered(f *host.Flight, res election.Result)
	Woken(e *Entry, turn bool)
}

// Tap makes t watch l: call it before the first Add.
func (l *Locker) Tap(t LockerTap) {
	l.tap = t
	l.fx = tee{l.fx, t}
	l.core.Tap = t.Answered
}

// tee tells the tap, then the process.
type tee struct {
	LockerEffects
	t LockerTap
}

func (x tee) Granted(e *Entry, name string, t election.Term) {
	x.t.Granted(e, name, t)
	x.LockerEffects.Granted(e, name, t)
}

func (x tee) Busy(e *Entry, ld election.Leader, slots []election.Leader) {
	x.t.Busy(e, ld, slots)
	x.LockerEffects.Busy(e, ld, slots)
}

func (x tee) Refused(e *Entry, err error) {
	x.t.Refused(e, err)
	x.LockerEffects.Refused(e, err)
}

func (x tee) Published(e *Entry, s driver.Snapshot) {
	x.t.Published(e, s)
	x.LockerEffects.Published(e, s)
}

func (x tee) Ended(e *Entry, t election.Term, r election.Reason) {
	x.t.Ended(e, t, r)
	x.LockerEffects.Ended(e, t, r)
}

func (x tee) Retired(e *Entry) {
	x.t.Retired(e)
	x.LockerEffects.Retired(e)
}

func (x tee) WakeNext(name, addr string) {
	x.t.WakeNext(name, addr)
	x.LockerEffects.WakeNext(name, addr)
}

// MemberTap watches a group member: its effects, each before the process
// has them, and each wake-up and each shard's callbacks' return as the
// member takes them.
type MemberTap interface {
	MemberEvents
	Woken(shard int)
	Returned(shard int)
}

// Tap makes t watch m: call it before the campaign starts.
func (m *Member) Tap(t MemberTap) {
	m.tap = t
	m.fx = memberTee{m.fx, t}
}

// Woken takes a wake-up for shard (groupcore.Campaign.Woken).
func (m *Member) Woken(shard int) {
	if m.tap != nil {
		m.tap.Woken(shard)
	}
	m.c.Woken(shard)
}

// Returned: shard's callbacks returned (groupcore.Campaign.Returned).
func (m *Member) Returned(shard int) {
	if m.tap != nil {
		m.tap.Returned(shard)
	}
	m.c.Returned(shard)
}

// memberTee tells the tap, then the process.
type memberTee struct {
	MemberEffects
	t MemberTap
}

func (x memberTee) Assigned(shard int, t election.Term) {
	x.t.Assigned(shard, t)
	x.MemberEffects.Assigned(shard, t)
}

func (x memberTee) Publish(shard int, s driver.Snapshot) {
	x.t.Publish(shard, s)
	x.MemberEffects.Publish(shard, s)
}

func (x memberTee) Revoked(shard int, t election.Term, r election.Reason) {
	x.t.Revoked(shard, t, r)
	x.MemberEffects.Revoked(shard, t, r)
}

func (x memberTee) Wake(addr string, shard int) {
	x.t.Wake(addr, shard)
	x.MemberEffects.Wake(addr, shard)
}

func (x memberTee) Changed(live []groupcore.Member) {
	x.t.Changed(live)
	x.MemberEffects.Changed(live)
}

func (x memberTee) Done() {
	x.t.Done()
	x.MemberEffects.Done()
}
