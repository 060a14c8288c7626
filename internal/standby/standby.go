// Package standby is a candidate's campaign for its lease's standby record
// (NAME + election.StandbySuffix), without goroutines. While the candidate
// follows, it campaigns for the record as a lock (internal/lockcore) on the
// record's own timing (election.StandbyTiming). Holding it makes the
// candidate the standby: it reads the lease at the hot cadence and
// publishes its wake-up address in the record's payload. The other
// followers are cold: they read the lease, and the standby record, once a
// cold poll, and one of them takes the record when its holder goes. A
// leader gives the record back. Which candidate is the standby decides only
// how often each reads: never who may take the lease, nor when.
//
// Candidates may have priorities (Preference): the record's payload
// carries its holder's, and a follower of higher priority takes the record
// from a standby of lower at once (election.Config.Preempt), so that the
// standby is the highest-priority follower. Equal priorities never take
// it from each other.
//
// A leader reads the record at once and then once a cold poll (Lead), or,
// where the store's change feed tells of the record's writes (Fed), on
// those only: to
// learn the standby's address, for renewal notices (Renewed names the
// address to notify after each confirmed renewal), and its priority. When
// the standby outranks the leader and is alive (its record changed since
// the leader's read before), and the leader's term is at least the hold-off
// old, the Host is asked to hand the lease over: at most once a term, so
// at most once a hold-off.
//
// A Host carries out what a Standby asks and calls it back one event at a
// time, so the Candidate's loop and a simulator can both run it.
package standby

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// Host is what a Standby asks of the runtime around it. The Standby calls
// it from the goroutine that calls the Standby.
type Host interface {
	// Now reads the clock.
	Now() time.Time
	// Call starts a store call on the standby record; its answer comes
	// back through Standby.Result.
	Call(op election.Op)
	// Cancel abandons the call in flight.
	Cancel()
	Log(level slog.Level, msg string, args ...any)
	// Hot says whether this candidate is now the standby. The host applies
	// it to the lease's Machine (SetCold) once its current step is over.
	Hot(hot bool)
	// Reschedule says that Due may have changed.
	Reschedule()
	// HandOver asks the leader to give the lease back for the standby,
	// holder, whose priority is higher: end the term (driver.HandOver)
	// and wake it. Called at most once a term.
	HandOver(holder string, priority int)
}

// Preference is a candidate's priority (higher is preferred; 0, the
// default, for all means none is) and the hold-off: a leader hands over
// only once its term is HoldOff old.
type Preference struct {
	Priority int
	HoldOff  time.Duration
}

// Payload returns the standby record's payload: the wake-up address ("" if
// none), and the priority unless it is 0, so that a candidate without
// priorities writes what it always did.
func Payload(addr string, priority int) []byte {
	if priority == 0 {
		return []byte(addr)
	}
	p := "priority=" + strconv.Itoa(priority)
	if addr != "" {
		p = addr + " " + p
	}
	return []byte(p)
}

// Parse reads a standby record's payload (Payload): its holder's wake-up
// address and priority. Anything it does not know is ignored.
func Parse(payload []byte) (addr string, priority int) {
	for _, f := range strings.Fields(string(payload)) {
		if v, ok := strings.CutPrefix(f, "priority="); ok {
			priority, _ = strconv.Atoi(v)
			continue
		}
		addr = f
	}
	return addr, priority
}

// Wake-ups are rate-limited as a lock's are (lockcore.WakeLimit): a burst
// of WakeBurst, then one every WakeEvery. A flood of them costs at most
// that many extra reads.
const (
	WakeBurst = lockcore.WakeBurst
	WakeEvery = lockcore.WakeEvery
)

// Standby is one candidate's standby campaign. The zero value is unusable:
// call New.
type Standby struct {
	h       Host
	name    string
	cfg     *election.Config
	lk      *lockcore.Lock // campaign, or release, under way; nil between
	follow  bool           // the candidate follows: campaign
	watch   bool           // NewWatch: never campaign, only read as a leader
	hot     bool
	again   time.Time // campaign again at this instant; zero: not planned
	gaveUp  bool      // the campaign under way was stopped on purpose
	refused bool      // the campaign under way was refused by the store: a cold poll before the next

	wakes lockcore.WakeLimit
	pref  Preference
	addr  string // ours, for wake-ups; "" if none, and then no notices

	// While the candidate leads (Lead): the record read for notices and
	// priorities.
	leading  bool
	ledAt    time.Time     // when the term began
	reading  uint64        // the ID of the read of the record in flight; 0 if none
	readN    uint64        // reads so far
	watchAt  time.Time     // read the record at this instant
	lastVer  lease.Version // what the last read found; NoVersion: none
	lastSeen bool          // a read was answered this term
	handing  bool          // HandOver asked this term
	target   string        // the standby's address, as last read; "" if none
	deadline time.Time     // the term's deadline when a notice was last due
	owed     bool          // a renewal went without its notice: send one once the address is known
	fed      bool          // the store's feed tells of the record's writes (Fed): read on them, not once a cold poll
}

// readID marks the IDs of the notifier's reads, apart from the campaign's
// (a Machine numbers its ops within 32 bits).
const readID = 1 << 63

// New returns a Standby for lease's standby record, campaigning with cfg
// (election.StandbyTiming; its Payload and Preempt are set here, on a
// copy) once Follow says so. addr is where this candidate listens for
// wake-ups, "" if nowhere.
func New(h Host, name string, cfg election.Config, addr string, pref Preference) *Standby {
	cfg.Payload = Payload(addr, pref.Priority)
	cfg.Preempt = func(held lease.Record) bool {
		_, p := Parse(held.Payload)
		return p < pref.Priority
	}
	return &Standby{h: h, name: name + election.StandbySuffix, cfg: &cfg, addr: addr, pref: pref}
}

// NewWatch returns a Standby that never campaigns for the record: only
// its leader's reads (Lead), for a candidate that is no standby itself
// (tenure.Config.Standby off), so that a preferred candidate is handed
// the lease beside a leader with the defaults. It sends no renewal
// notices. Follow does nothing.
func NewWatch(h Host, name string, cfg election.Config, pref Preference) *Standby {
	s := New(h, name, cfg, "", pref)
	s.watch = true
	return s
}

// Follow says whether the candidate follows (campaign for the record) or
// not (it leads, or stops: give the record back).
func (s *Standby) Follow(follow bool) {
	if s.watch || s.follow == follow {
		return
	}
	s.follow = follow
	switch {
	case !follow && s.lk != nil:
		s.gaveUp = true
		s.lk.Stop()
	case !follow:
		s.again = time.Time{}
	case s.lk == nil:
		s.start()
	}
	s.h.Reschedule()
}

// start begins a campaign; one that ended is replaced when it retires.
func (s *Standby) start() {
	s.again, s.gaveUp = time.Time{}, false
	lk := new(lockcore.Lock)
	if err := lk.Init((*lockHost)(s), s.name, s.cfg, false, false); err != nil {
		s.h.Log(slog.LevelError, "standby: bad configuration", "err", err) // validated: not reached
		return
	}
	s.lk = lk
	lk.Start()
}

// Result takes the answer of a call on the record.
func (s *Standby) Result(r election.Result) {
	switch {
	case r.ID&readID != 0:
		if r.ID == s.reading {
			s.watched(r)
		}
	case s.lk != nil:
		s.lk.Result(r)
	}
}

// Lead says whether the candidate leads: it then reads the record, once
// the campaign has given it back, at once and then once a cold poll, to
// learn the standby's address and priority.
func (s *Standby) Lead(on bool) {
	if s.leading == on {
		return
	}
	now := s.h.Now()
	s.leading, s.target, s.deadline, s.lastSeen, s.handing, s.owed = on, "", time.Time{}, false, false, false
	s.ledAt, s.watchAt = now, now
	if !on && s.reading != 0 {
		s.reading = 0
		s.h.Cancel()
	}
	s.h.Reschedule()
}

// Fed says whether the store's change feed tells of the record's writes.
// While it does, a leader reads the record as its term begins and then
// only when the feed tells of a write (Told), not once a cold poll: on
// Kubernetes, etcd and PostgreSQL a record nobody writes costs nothing. A
// feed that stops has the leader read at once, and poll again.
func (s *Standby) Fed(on bool) {
	if s.fed == on {
		return
	}
	s.fed = on
	if !on && s.leading && s.watchAt.IsZero() {
		s.watchAt = s.h.Now()
	}
	s.h.Reschedule()
}

// Told takes the feed's word that the record was written (or that the
// feed started over): a leader reads it at once.
func (s *Standby) Told() {
	if s.leading && s.reading == 0 {
		s.watchAt = s.h.Now()
		s.h.Reschedule()
	}
}

// Renewed returns the address to send a renewal notice to, given what a
// step of the lease's Machine published: whether it leads, and its term's
// deadline. A notice is due when the deadline moved on (a write of the
// leader's confirmed). "" when none is due, no standby is known, or this
// candidate listens for no wake-ups (it sends no notices either).
//
// Early in a term (its first cold poll), while no standby's address is
// known, a renewal also reads the record at once, and the notice it went
// without is sent once a read finds the address (Owed): a leader learns
// where its standby listens by its first renewals, not a cold poll later,
// so that notices flow from a term's first renewal.
func (s *Standby) Renewed(leading bool, deadline time.Time) string {
	if !s.leading || s.addr == "" || !leading || !deadline.After(s.deadline) {
		return ""
	}
	s.deadline = deadline
	if s.target == "" {
		if now := s.h.Now(); now.Before(s.ledAt.Add(s.cfg.PollInterval)) {
			s.owed = true
			if s.reading == 0 && now.Before(s.watchAt) {
				s.watchAt = now
				s.h.Reschedule()
			}
		}
	}
	return s.target
}

// Owed returns the address to send the notice a renewal went without,
// once a read found it (Renewed); "" if none is owed.
func (s *Standby) Owed() string {
	if !s.owed || s.target == "" || !s.leading {
		return ""
	}
	s.owed = false
	return s.target
}

// watched takes the answer of a leader's read of the record.
func (s *Standby) watched(r election.Result) {
	s.reading = 0
	now := s.h.Now()
	rec := r.Record
	s.watchAt = now.Add(s.cfg.PollInterval) // a cold poll: when one may have taken it
	if s.fed {
		s.watchAt = time.Time{} // the feed tells of the next write
	}
	if r.Err != nil && !errors.Is(r.Err, lease.ErrNotFound) {
		s.h.Reschedule() // unknown: keep what we knew
		return
	}
	ver := r.Version
	if r.Err != nil {
		ver = lease.NoVersion // not found
	}
	// Alive if written since our read before; a first read proves nothing.
	changed := s.lastSeen && ver != s.lastVer
	s.lastSeen, s.lastVer = true, ver
	if held := r.Err == nil && !rec.Released && rec.Holder != s.cfg.ID; !held {
		s.target = ""
		s.h.Reschedule()
		return
	}
	addr, prio := Parse(rec.Payload)
	if s.addr != "" && addr != s.target && addr != "" {
		s.h.Log(slog.LevelDebug, "standby: sending renewal notices", "standby", rec.Holder, "addr", addr)
	}
	s.target = addr // "" if it listens for none
	// Our term old enough: a preferred candidate that keeps crashing takes
	// the lease at most once a hold-off.
	if prio > s.pref.Priority && changed && !s.handing && !now.Before(s.ledAt.Add(s.pref.HoldOff)) {
		s.handing = true
		s.h.HandOver(rec.Holder, prio)
	}
	s.h.Reschedule()
}

// Due returns the instant of the next timer; zero if none.
func (s *Standby) Due() time.Time {
	d := s.again
	if s.lk != nil {
		if t := s.lk.Due(); !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	} else if s.leading && s.reading == 0 && !s.watchAt.IsZero() && (d.IsZero() || s.watchAt.Before(d)) {
		d = s.watchAt
	}
	return d
}

// Fire runs whatever is due at now.
func (s *Standby) Fire(now time.Time) {
	switch {
	case !s.again.IsZero() && !now.Before(s.again) && s.lk == nil:
		s.start()
	case s.lk != nil:
		s.lk.Fire(now)
	case s.leading && s.reading == 0 && !s.watchAt.IsZero() && !now.Before(s.watchAt):
		s.readN++
		s.reading = readID | s.readN
		s.h.Call(election.Op{ID: s.reading, Kind: election.OpGet})
	}
	s.h.Reschedule()
}

// Done reports whether nothing is under way: no campaign, no release, no
// leader's read.
func (s *Standby) Done() bool { return s.lk == nil && !s.follow && s.reading == 0 }

// Hot reports whether this candidate is the standby.
func (s *Standby) Hot() bool { return s.hot }

// AllowWake reports whether a wake-up received at now may make the
// candidate read: WakeBurst at once, then one every WakeEvery.
func (s *Standby) AllowWake(now time.Time) bool { return s.wakes.Allow(now) }

func (s *Standby) setHot(hot bool) {
	if s.hot != hot {
		s.hot = hot
		s.h.Hot(hot)
	}
}

// lockHost is the lockcore.Host of the campaign.
type lockHost Standby

func (l *lockHost) Now() time.Time             { return l.h.Now() }
func (l *lockHost) Call(op election.Op, _ int) { l.h.Call(op) } // never fair: no queue calls
func (l *lockHost) Cancel()                    { l.h.Cancel() }
func (l *lockHost) Log(lv slog.Level, msg string, args ...any) {
	l.h.Log(lv, "standby: "+msg, args...)
}
func (l *lockHost) Granted(election.Term)                { (*Standby)(l).setHot(true) }
func (l *lockHost) Busy(election.Leader)                 {} // not a TryLock: never called
func (l *lockHost) Publish(driver.Snapshot)              {}
func (l *lockHost) Ended(election.Term, election.Reason) { (*Standby)(l).setHot(false) }
func (l *lockHost) Reschedule()                          { l.h.Reschedule() }
func (l *lockHost) WakeNext(string)                      {} // no SetWake: never called

// Refused: the store refused for good at the first answer. The lease's own
// Machine meets the same refusal and ends the run; until then, try again a
// cold poll later.
func (l *lockHost) Refused(err error) {
	l.refused = true
	l.h.Log(slog.LevelWarn, "standby: campaign refused", "err", err)
}

// Retired: the campaign is over (the record given back, or lost, or
// refused). While the candidate follows, a new one starts at once if this
// one was given back on purpose, or the record was last seen free (a
// candidate of higher priority took it, and gave it back as it took the
// lease), else a cold poll later.
func (l *lockHost) Retired() {
	s := (*Standby)(l)
	s.setHot(false)
	free := s.lk.Leader().Holder == "" && s.lk.Err() == nil && !s.refused
	s.lk, s.refused = nil, false
	if s.follow {
		s.again = s.h.Now()
		if !s.gaveUp && !free {
			s.again = s.again.Add(s.cfg.PollInterval)
		}
	}
	s.h.Reschedule()
}
