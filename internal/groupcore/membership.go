package groupcore

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// MembershipHost is what a Membership asks of the runtime around it. The
// Membership calls it from the goroutine that calls the Membership.
type MembershipHost interface {
	Now() time.Time
	// Call starts a store call on the membership record; its answer comes
	// back through Membership.Result, within the OpTimeout, an error if
	// need be.
	Call(op election.Op)
	Log(level slog.Level, msg string, args ...any)
	// Changed says that the live members, as this one sees them, changed.
	Changed(live []Member)
}

// Membership is one member's heartbeat in its group's membership record,
// without goroutines: once a Beat it rewrites the record by compare-and-
// swap with its own SEQ moved on and the entries it found dead dropped,
// reading it first when there are other members (they will have written
// since). So a beat costs a read and a write (one write for a lone
// member; a conflict costs another pair): nothing grows with the shards.
type Membership struct {
	h      MembershipHost
	name   string // the record's
	id     string // the member's, the Holder of its writes
	t      election.Timing
	self   Entry
	view   View
	rnd    *rand.Rand
	known  []Entry       // the record's entries as last read or written
	writer string        // the key of known's writer; "" if none
	good   []Entry       // the last record read or written with our entry in it
	beatAt time.Time     // our last write of the record that worked
	ver    lease.Version // their version; lease.NoVersion: no record
	verOK  bool          // known and ver are current, as far as we know
	fresh  bool          // read for the beat under way
	op     *election.Op  // the call in flight
	next   time.Time     // the next beat; zero while a call is in flight
	tries  int           // failed calls in a row
	live   []Member      // as last reported to Changed
	leave  bool          // drop our entry and stop
	done   bool          // left, or stopped
	fatal  error         // the store refused us for good
	lastOK time.Time     // our last read or write of the record that worked
	again  bool          // Refresh came while a call was in flight: beat again after it
	// junk: the record holds what no member wrote (its payload does not
	// decode), at version junkVer, read so since junkSince: rewritten once
	// it stayed so for the view's Wait, as a lost record is.
	junkVer   lease.Version
	junkSince time.Time
	junkSaid  time.Time // the last error logged about the record
	rewrite   bool      // the next write replaces junk: it drops no entry
	opID      uint64
	Err       error // the last store error, for status
}

// NewMembership returns member id's heartbeat in the record of the group
// name (name + MembersSuffix), of weight weight, on timing t (defaults
// filled in): a beat every RenewInterval, a member dead once its entry
// stayed the same for LeaseDuration·(1+MaxDrift). Start it with Fire.
func NewMembership(h MembershipHost, name, id string, weight int, t election.Timing, rnd *rand.Rand) *Membership {
	m := &Membership{h: h, name: name + MembersSuffix, id: id, t: t, rnd: rnd,
		self: Entry{Key: Key(id), Weight: max(weight, 1)}}
	m.view.Wait = time.Duration(float64(t.LeaseDuration) * (1 + t.MaxDrift))
	m.next = h.Now()
	return m
}

// Due returns when Fire is next due; zero while a call is in flight or
// once done.
func (m *Membership) Due() time.Time { return m.next }

// Done reports whether the Membership has left (Leave) or stopped.
func (m *Membership) Done() bool { return m.done }

// Live returns the live members as last reported.
func (m *Membership) Live() []Member { return m.live }

// SetAddr sets the wake-up address this member publishes in its entry.
func (m *Membership) SetAddr(addr string) { m.self.Addr = addr }

// Fatal returns the error that stopped the Membership: the store refused
// its record for good (ErrPermanent: no such table or bucket, access
// denied). Nil otherwise.
func (m *Membership) Fatal() error { return m.fatal }

// Beating reports whether this member's entry is alive by its own beats
// at now: a write of it worked within the view's Wait. Its entry may be
// missing from the record meanwhile (someone wrote it without: junk, a
// forger), and the others then count it out until its next beat; it
// still counts itself in.
func (m *Membership) Beating(now time.Time) bool {
	return !m.beatAt.IsZero() && now.Sub(m.beatAt) < m.view.Wait
}

// LastOK returns when a read or write of the record last worked.
func (m *Membership) LastOK() time.Time { return m.lastOK }

// Refresh beats now rather than at the next beat, so that the view is
// fresh: someone said the membership changed (a wake-up).
func (m *Membership) Refresh() {
	switch {
	case m.done || m.leave:
	case m.op != nil:
		m.again = true // what is in flight may have been read before the change
	default:
		m.next = m.h.Now()
	}
}

// RefreshPending reports whether a beat that will read the record afresh
// is due already: another Refresh would add nothing.
func (m *Membership) RefreshPending(now time.Time) bool {
	return m.again || m.op == nil && !m.next.IsZero() && !m.next.After(now)
}

// Stop stops the heartbeat where it is, its entry left to die out.
func (m *Membership) Stop() {
	m.done, m.next = true, time.Time{}
}

// Leave drops this member's entry from the record, so that the others
// rebalance without waiting for it to die, and then stops.
func (m *Membership) Leave() {
	m.leave = true
	if m.op == nil && !m.done {
		m.next = m.h.Now()
	}
}

// Fire runs the beat due at now.
func (m *Membership) Fire(now time.Time) {
	if m.op != nil || m.done || m.next.IsZero() || now.Before(m.next) {
		return
	}
	m.next = time.Time{}
	if len(m.known) > 1 && !m.leave && !m.fresh {
		m.verOK = false // others beat too: a write on what we knew would only conflict
	}
	m.fresh = false
	if !m.verOK {
		m.call(election.Op{Kind: election.OpGet})
		return
	}
	var entries []Entry
	if m.leave {
		entries = slices.DeleteFunc(slices.Clone(m.known), func(e Entry) bool { return e.Key == m.self.Key })
		if len(entries) == len(m.known) {
			m.done = true // not in the record: nothing to drop
			return
		}
	} else {
		dead := m.view.Dead(now)
		if m.rewrite { // the view is as old as the junk: it proves no one dead
			dead, m.rewrite = nil, false
		}
		entries = Beat(m.known, m.self, dead)
		if len(entries) > MaxMembers && len(m.good) > 0 {
			// Full, and we were in it: entries never seen to beat that we
			// did not know before (a forger's ghosts) make room for us. A
			// joiner evicts no one: it waits for room.
			for _, k := range m.view.Unconfirmed() {
				if !hasKey(m.good, k) {
					dead = append(dead, k)
				}
			}
			entries = Beat(m.known, m.self, dead)
		}
	}
	payload, err := Encode(entries)
	if err != nil {
		m.Err = err
		m.h.Log(slog.LevelError, "membership record full: this member cannot join", "group", m.name, "err", err)
		m.retry(now)
		return
	}
	rec := lease.Record{Holder: m.id, Token: 1, Duration: m.t.LeaseDuration, Payload: payload,
		Nonce: strconv.FormatUint(m.rnd.Uint64(), 16)}
	m.call(election.Op{Kind: election.OpPut, Record: rec, Expect: m.ver})
}

func (m *Membership) call(op election.Op) {
	m.opID++
	op.ID = m.opID
	m.op = &op
	m.h.Call(op)
}

// Result takes the answer to the call in flight.
func (m *Membership) Result(r election.Result) {
	op := m.op
	if op == nil || r.ID != op.ID {
		return
	}
	m.op = nil
	if m.done {
		return // stopped meanwhile
	}
	now := m.h.Now()
	switch {
	case errors.Is(r.Err, lease.ErrPermanent):
		m.Err, m.fatal, m.done = r.Err, r.Err, true
		return
	case errors.Is(r.Err, lease.ErrInvalidRecord):
		// No member can read it, nor replace it without its version: the
		// shards held keep their terms, and an operator repairs it.
		m.Err, m.verOK = r.Err, false
		m.say(now, "membership record unreadable by the store: replace it with tenure release --force "+m.name, r.Err)
		m.retry(now)
		return
	case op.Kind == election.OpGet && errors.Is(r.Err, lease.ErrNotFound):
		m.known, m.writer, m.ver, m.verOK = nil, "", lease.NoVersion, true
	case op.Kind == election.OpGet && r.Err == nil:
		es, err := Decode(r.Record.Payload)
		if err != nil {
			m.Err = err
			if r.Version != m.junkVer {
				m.junkVer, m.junkSince = r.Version, now
			}
			if now.Sub(m.junkSince) < m.view.Wait {
				m.say(now, "membership record unreadable: rewritten once it stays so for a lease (is it another program's?)", err)
				m.retry(now)
				return
			}
			// Unchanged for a lease, as a silent holder's record: write
			// over it the entries last read well, ours beaten on.
			m.say(now, "membership record unreadable for a lease: rewriting it", err)
			m.ver, m.verOK, m.fresh, m.rewrite = r.Version, true, true, true
			m.next = now
			return
		}
		m.sawAgain()
		if hasKey(es, m.self.Key) {
			m.good = es
		} else if m.Beating(now) && len(m.good) > 0 {
			// Our entry is gone while our beats work: no member drops the
			// entry of one that beats, so someone else wrote this record
			// (restored, forged). Put back what it dropped, as we knew it;
			// the dead among them die out as any entry does.
			m.say(now, "membership record written without this member's entry, though it beats: putting back the entries it dropped", fmt.Errorf("written by %q", r.Record.Holder))
			for _, e := range m.good {
				if !hasKey(es, e.Key) {
					es = append(es, e)
				}
			}
		}
		m.known, m.writer, m.ver, m.verOK, m.fresh = es, Key(r.Record.Holder), r.Version, true, true
	case op.Kind == election.OpPut && r.Err == nil:
		m.sawAgain()
		es, _ := Decode(op.Record.Payload) // ours: it decodes
		m.known, m.writer, m.ver, m.verOK = es, m.self.Key, r.Version, true
		if hasKey(es, m.self.Key) {
			m.beatAt, m.good = now, es
		}
		m.Err, m.tries = nil, 0
		m.observe(now)
		switch {
		case m.leave && slices.ContainsFunc(es, func(e Entry) bool { return e.Key == m.self.Key }):
			m.next = now // a beat that was in flight when Leave came: now drop our entry
		case m.leave:
			m.done = true
		case m.again:
			m.again, m.fresh, m.next = false, false, now // read afresh, and beat
		default:
			m.next = now.Add(m.t.RenewInterval)
		}
		return
	default: // a conflict, or an outcome unknown: read the record afresh
		m.verOK = false
		if !errors.Is(r.Err, lease.ErrConflict) {
			m.Err = r.Err
			m.retry(now)
			return
		}
	}
	if op.Kind == election.OpGet {
		m.Err, m.tries = nil, 0
		m.observe(now)
	}
	m.next = now // write the beat now that the record is known
}

// observe updates the view from the entries known at now and reports a
// change of the live members.
func (m *Membership) observe(now time.Time) {
	m.lastOK = now
	m.view.Observe(now, m.known, m.writer)
	live := m.view.Live(now)
	if !slices.Equal(live, m.live) {
		m.live = live
		m.h.Changed(live)
	}
}

// sawAgain takes a record read or written well after junk: what the view
// knew is as old as the junk, which hid every beat meanwhile, so it starts
// afresh, every member alive until seen still for Wait, as when this
// member joined; otherwise they would all seem dead at once.
func (m *Membership) sawAgain() {
	if m.junkVer != "" {
		m.junkVer = ""
		m.view = View{Wait: m.view.Wait}
	}
}

// say logs err about the record at most once per ten beats (20s at the
// defaults), so that a record that stays unreadable is not a flood.
func (m *Membership) say(now time.Time, msg string, err error) {
	if !m.junkSaid.IsZero() && now.Sub(m.junkSaid) < 10*m.t.RenewInterval {
		return
	}
	m.junkSaid = now
	m.h.Log(slog.LevelError, msg, "record", m.name, "err", err)
}

func hasKey(es []Entry, key string) bool {
	return slices.ContainsFunc(es, func(e Entry) bool { return e.Key == key })
}

func (m *Membership) retry(now time.Time) {
	m.next = now.Add(election.Backoff(m.t, m.tries, m.rnd))
	m.tries = min(m.tries+1, 62)
}
