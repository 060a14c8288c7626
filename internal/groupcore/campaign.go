package groupcore

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/lockcore"
	"github.com/tenure-go/tenure/lease"
)

// A member's campaign. Each member beats in the membership record
// (Membership) and, after every change of who is alive in its view,
// computes who should own each shard (Assign over the live members). It
// campaigns, as a waiting lock, for each shard that should be its own and
// that it does not hold, and gives back each shard it holds that should be
// another's: it stops the shard's work (the term's callbacks return),
// releases the lock, and wakes the new owner at the address in its entry,
// so that the new owner reads the shard at once instead of at its next
// poll. A member woken for a shard it does not wait for beats at once: the
// wake-up says its view is out of date (a member left).
//
// The lock rules alone decide who holds a shard: views may differ for a
// beat, and then two members may both campaign for a shard; one holds it,
// and the other waits until its view says the shard is not its own.
//
// Crashes. A member whose entry two of our reads a beat apart found
// unmoved is suspected: each other member campaigns at once for the shards that would
// come to it were the suspect dead, so that the takeover wait of those
// shards (ttl·(1+ρ) from the first read, as for any lock) runs beside the
// membership's own wait instead of after it. A member that beats again is
// no longer suspected and its shards stay with it; it was only read.
// Nobody suspects others while its own view is stale (its reads fail):
// else a member cut off from the store would campaign for every shard.

// MaxShards bounds a group's shards.
const MaxShards = 4096

// ShardName names shard i of the group name.
func ShardName(name string, i int) string { return name + "/" + strconv.Itoa(i) }

// CampaignConfig configures a Campaign.
type CampaignConfig struct {
	Name   string // the group's: shards are Name/0 … Name/Shards-1
	Shards int
	ID     string // the member's, the holder of its shards and entry
	Weight int    // its share of the shards relative to the others'; 0: 1
	Addr   string // where it listens for wake-ups, published in its entry; "": none
	// Lock is the configuration of every shard's Machine (its Timing the
	// membership's too); it is kept and must not change.
	Lock *election.Config
	// Watch: the member also waits on each shard that would fall to it were
	// its owner to die, polling it as a lock's waiter does, so that a crash
	// is failed over within the lock's bound instead of after a suspicion;
	// a read per shard per PollInterval for the group.
	Watch bool
	// Machine makes a shard's Machine; nil: an election.Machine for Lock.
	// The simulator's baselines replace it.
	Machine func() (lockcore.Machine, error)
}

// CampaignHost is what a Campaign asks of the runtime around it. The
// Campaign calls it from the goroutine that calls the Campaign.
type CampaignHost interface {
	Now() time.Time
	// Call starts a store call on the membership record (shard -1) or on
	// shard's record. The answer goes to Campaign.Result with the shard: a
	// membership call's within the Lock's OpTimeout, an error if need be;
	// a shard's is timed by its lock, which abandons it with Cancel. One
	// call per record is in flight; a write's answer carries the record
	// written.
	Call(shard int, op election.Op)
	// Cancel abandons the call in flight on shard's record.
	Cancel(shard int)
	Log(level slog.Level, msg string, args ...any)
	// Assigned says that the member holds shard for term t: run its work.
	Assigned(shard int, t election.Term)
	// Publish reports what a held shard's Machine knows after a step
	// (driver.Effects.Publish): the term's deadline moves with it.
	Publish(shard int, s driver.Snapshot)
	// Revoked ends the term of shard: stop its work, and call
	// Campaign.Returned(shard) once its callbacks have returned; only then
	// is the shard released.
	Revoked(shard int, t election.Term, r election.Reason)
	// Wake sends a wake-up for shard to addr. It must not wait on the
	// network.
	Wake(addr string, shard int)
	// Changed says that the live members, as this member sees them,
	// changed.
	Changed(live []Member)
	// Reschedule says that Due may have changed.
	Reschedule()
	// Done says that the member is over: it left (Leave), or the store
	// refused it for good (Err).
	Done()
}

// Campaign is one member of a group, without goroutines: its heartbeat in
// the membership record and its campaign over the shards. The zero Campaign
// is unusable: call NewCampaign.
type Campaign struct {
	h     CampaignHost
	cfg   CampaignConfig
	t     election.Timing
	ms    *Membership
	self  string // our key
	sh    []shardLock
	dirty bool // plan again: the view, a shard or the time changed

	suspectAfter time.Duration
	refresh      lockcore.WakeLimit
	refreshAt    time.Time // a wake-up the limit held back: refresh then
	watchMachine func() (lockcore.Machine, error)

	held    int
	wanted  int
	leaving bool
	leaveBy time.Time // stop the shards even if our entry is not dropped yet
	quitBy  time.Time // stop trying to drop our entry
	err     error     // the store refused us for good
	done    bool
	ids     map[string]string // key → ID, as shard records named their holders

	assigned assignCache
}

// shardLock is one shard's lock, and the lockcore.Host it runs under.
type shardLock struct {
	m        *Campaign
	i        int
	lk       *lockcore.Lock  // nil: no campaign
	held     bool            // a term is under way
	stopped  bool            // we stopped the lock
	watching bool            // its Machine is TakeoverOnly: it waits in case the owner dies
	gaveBack bool            // we stopped it while it was held: wake the next owner once released
	why      election.Reason // why we stopped it, for its term's end
	wakeTo   string          // the next owner's address
	limit    lockcore.WakeLimit
}

// NewCampaign returns member cfg.ID of the group cfg.Name for h. Start it
// with Start.
func NewCampaign(h CampaignHost, cfg CampaignConfig) (*Campaign, error) {
	if cfg.Shards < 1 || cfg.Shards > MaxShards {
		return nil, fmt.Errorf("%d shards: a group has 1 to %d", cfg.Shards, MaxShards)
	}
	if cfg.Weight < 0 || cfg.Weight > MaxWeight {
		return nil, fmt.Errorf("weight %d: outside [1, %d]", cfg.Weight, MaxWeight)
	}
	if cfg.Addr != "" {
		if _, err := packAddr(cfg.Addr); err != nil {
			return nil, err
		}
	}
	if err := cfg.Lock.Validate(); err != nil {
		return nil, err
	}
	watchMachine := cfg.Machine // a baseline's, as it is
	if cfg.Machine == nil {
		lc := cfg.Lock
		wc := *cfg.Lock
		wc.TakeoverOnly = true
		cfg.Machine = func() (lockcore.Machine, error) { return election.NewShared(lc) }
		watchMachine = func() (lockcore.Machine, error) { return election.NewShared(&wc) }
	}
	t := cfg.Lock.Timing
	m := &Campaign{h: h, cfg: cfg, t: t, self: Key(cfg.ID), watchMachine: watchMachine}
	m.ms = NewMembership((*msHost)(m), cfg.Name, cfg.ID, max(cfg.Weight, 1), t, cfg.Lock.Rand)
	m.ms.SetAddr(cfg.Addr)
	// Our reads see another member's entry move once a beat of theirs,
	// but a read and a write that cross may show it unmoved once: unmoved
	// across two reads a beat apart, it missed a beat.
	m.suspectAfter = t.RenewInterval + t.RenewInterval/2
	m.sh = make([]shardLock, cfg.Shards)
	for i := range m.sh {
		m.sh[i] = shardLock{m: m, i: i}
	}
	return m, nil
}

// Start begins: the first beat now.
func (m *Campaign) Start() {
	m.ms.Fire(m.h.Now())
	m.after()
}

// Leave hands every shard over and leaves the group: the member's entry
// is dropped from the record, so that the others rebalance at once, then
// each held shard is released (its callbacks having returned) and its new
// owner woken. Done follows.
func (m *Campaign) Leave() {
	if m.leaving || m.done {
		return
	}
	m.leaving, m.dirty = true, true
	now := m.h.Now()
	m.leaveBy, m.quitBy = now.Add(m.t.OpTimeout), now.Add(m.cfg.Lock.ReleaseTimeout)
	m.ms.Leave()
	m.after()
}

// Result takes the answer of a call on the membership record (shard -1)
// or on shard's record.
func (m *Campaign) Result(shard int, r election.Result) {
	if shard < 0 {
		seen := m.ms.LastOK()
		m.ms.Result(r)
		if !m.ms.LastOK().Equal(seen) {
			m.dirty = true // suspects may have changed
		}
		if err := m.ms.Fatal(); err != nil && m.err == nil {
			m.fail(fmt.Errorf("membership record %q: %w", m.cfg.Name+MembersSuffix, err))
		}
	} else if lk := m.sh[shard].lk; lk != nil {
		if h := r.Record.Holder; h != "" && r.Err == nil {
			m.learnID(h)
		}
		lk.Result(r)
		if s := &m.sh[shard]; s.watching && s.lk != nil && s.lk.Leader().Holder == "" {
			m.dirty = true // found given back: ours, perhaps, and then not to be waited out
		}
	}
	m.after()
}

// Returned says that the callbacks of shard's ended term have returned.
func (m *Campaign) Returned(shard int) {
	if lk := m.sh[shard].lk; lk != nil {
		lk.Returned()
	}
	m.after()
}

// Woken takes a wake-up for shard: a shard released for us, most likely.
// A lock waiting for it reads it now; without one, the member beats now
// to learn what changed. Both are rate-limited.
func (m *Campaign) Woken(shard int) {
	if m.leaving || m.done || m.err != nil || shard < 0 || shard >= len(m.sh) {
		return
	}
	now := m.h.Now()
	s := &m.sh[shard]
	switch {
	case s.lk != nil:
		if s.limit.Allow(now) && s.lk.Poke() {
			m.h.Log(slog.LevelDebug, "woken: reading the shard", "shard", shard)
		}
	case m.ms.RefreshPending(now): // wake-ups come in bursts: one read serves them all
	case m.refresh.Allow(now):
		m.h.Log(slog.LevelDebug, "woken for a shard not ours: reading the membership", "shard", shard)
		m.ms.Refresh()
	case m.refreshAt.IsZero():
		// Held back, not dropped: leaves in quick succession (a rolling
		// restart) wake each member many times.
		m.refreshAt = m.refresh.Next(now)
	}
	m.after()
}

// Waiting reports whether the member campaigns for shard i and does not
// hold it: it waits for the shard's holder to give it back, or to go.
func (m *Campaign) Waiting(i int) bool {
	s := &m.sh[i]
	return s.lk != nil && !s.held && !m.leaving && !m.done
}

// Noticed takes an event of the store's change feed for shard's record: a
// lock waiting for it reads it now, within its Machine's notice rate
// limit (lockcore.Lock.Noticed); a release is a wake-up (Woken).
func (m *Campaign) Noticed(shard int, ev lease.Event) {
	if shard < 0 || shard >= len(m.sh) {
		return
	}
	if lk := m.sh[shard].lk; lk != nil && !m.sh[shard].held {
		lk.Noticed(ev)
		m.after()
	} else if ev.Released {
		m.Woken(shard) // no lock waits: learn what changed
	}
}

// Fire runs whatever is due at now.
func (m *Campaign) Fire(now time.Time) {
	if d := m.ms.Due(); !d.IsZero() && !now.Before(d) {
		m.ms.Fire(now)
	}
	if !m.refreshAt.IsZero() && !now.Before(m.refreshAt) {
		m.refreshAt = time.Time{}
		if !m.leaving && m.refresh.Allow(now) {
			m.ms.Refresh()
		}
	}
	if !m.leaveBy.IsZero() && !now.Before(m.leaveBy) {
		m.leaveBy, m.dirty = time.Time{}, true
	}
	if !m.quitBy.IsZero() && !now.Before(m.quitBy) {
		m.quitBy = time.Time{}
		m.ms.Stop() // the others drop our entry once it has not moved for ttl·(1+ρ)
	}
	for i := range m.sh {
		if lk := m.sh[i].lk; lk != nil {
			if d := lk.Due(); !d.IsZero() && !now.Before(d) {
				lk.Fire(now)
			}
		}
	}
	m.after()
}

// Due returns the instant of the member's next timer; zero if none.
func (m *Campaign) Due() time.Time {
	if m.done {
		return time.Time{}
	}
	d := m.ms.Due()
	early := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	early(m.leaveBy)
	early(m.refreshAt)
	if !m.ms.Done() {
		early(m.quitBy)
	}
	for i := range m.sh {
		if lk := m.sh[i].lk; lk != nil {
			early(lk.Due())
		}
	}
	return d
}

// Done reports whether the member is over.
func (m *Campaign) Done() bool { return m.done }

// Err returns why the store refused the member for good, or nil.
func (m *Campaign) Err() error { return m.err }

// StoreErr returns the last store error the membership or a shard saw, or
// nil.
func (m *Campaign) StoreErr() error {
	if m.ms.Err != nil {
		return m.ms.Err
	}
	for i := range m.sh {
		if lk := m.sh[i].lk; lk != nil && lk.Err() != nil {
			return lk.Err()
		}
	}
	return nil
}

// Key returns the member's key in the membership record.
func (m *Campaign) Key() string { return m.self }

// learnID remembers the ID behind a key: the record holds keys only, and a
// shard's record names its holder.
func (m *Campaign) learnID(id string) {
	if m.ids == nil {
		m.ids = map[string]string{Key(m.cfg.ID): m.cfg.ID}
	}
	if len(m.ids) > 2*MaxMembers { // members come and go: forget the gone
		live := map[string]bool{}
		for _, l := range m.ms.Live() {
			live[l.Key] = true
		}
		maps.DeleteFunc(m.ids, func(k, _ string) bool { return !live[k] && k != m.self })
	}
	m.ids[Key(id)] = id
}

// ID returns the ID of the member of key, as far as known: its own, or
// one that held a shard this member read; "" otherwise.
func (m *Campaign) ID(key string) string {
	if key == m.self {
		return m.cfg.ID
	}
	return m.ids[key]
}

// Live returns the live members as last reported to Changed.
func (m *Campaign) Live() []Member { return m.ms.Live() }

// Held reports whether the member holds shard i.
func (m *Campaign) Held(i int) bool { return m.sh[i].held }

// HeldCount returns how many shards the member holds.
func (m *Campaign) HeldCount() int { return m.held }

// Wanted returns how many shards the member should own as it last
// planned.
func (m *Campaign) Wanted() int { return m.wanted }

func (m *Campaign) fail(err error) {
	m.err, m.dirty = err, true
	m.h.Log(slog.LevelError, "group member stopped: the store refused it", "group", m.cfg.Name, "err", err)
	if !m.ms.Done() && !m.leaving {
		m.leaving = true
		m.quitBy = m.h.Now().Add(m.cfg.Lock.ReleaseTimeout)
		m.ms.Leave()
	}
}

// after runs once an event has been taken: it plans if something
// changed, and ends the member once nothing is left.
func (m *Campaign) after() {
	if m.done {
		return
	}
	if m.dirty {
		m.dirty = false
		m.plan(m.h.Now())
	}
	if (m.leaving || m.err != nil) && m.ms.Done() && !m.anyLock() {
		m.done = true
		m.h.Reschedule()
		m.h.Done()
		return
	}
	m.h.Reschedule()
}

func (m *Campaign) anyLock() bool {
	for i := range m.sh {
		if m.sh[i].lk != nil {
			return true
		}
	}
	return false
}

// plan computes who should own each shard in our view at now, and starts
// or stops our shards' locks to match.
func (m *Campaign) plan(now time.Time) {
	// The view as of our last read or write that worked: a member dies
	// in it only if our reads could have seen it beat, so that a member
	// cut off from the store keeps its shards until their deadlines
	// instead of acting on a view gone stale.
	v := &m.ms.view
	seen := m.ms.LastOK()
	live := v.Live(seen)
	selfLive := containsKey(live, m.self)
	if !selfLive && m.ms.Beating(now) {
		// Our entry is missing from a record someone else wrote, while
		// our own beats work: we are a member, whatever it says.
		live = append(live, Member{Key: m.self, Weight: m.ms.self.Weight})
		slices.SortFunc(live, func(a, b Member) int { return strings.Compare(a.Key, b.Key) })
		selfLive = true
	}
	winding := m.err != nil || m.leaving && (m.ms.Done() || m.leaveBy.IsZero())
	why := election.ReasonHandedOver
	if !selfLive && !m.leaving && m.err == nil {
		why = election.ReasonStoreUnavailable // our heartbeat has been failing: the others count us out
	}
	if m.leaving || m.err != nil || !selfLive {
		// Not a member (yet, or any more): own nothing; a shard we hold
		// goes to its owner among the others.
		live = removeKey(live, m.self)
		if m.leaving && !winding {
			return // our entry goes first, so that the woken find us gone
		}
	}
	owner := m.assigned.get(len(m.sh), live)
	// Suspects: members whose entries our last read found unmoved for
	// suspectAfter, if that read is recent (ours are not failing).
	var alive []Member
	fresh := now.Sub(seen) < m.suspectAfter
	for _, x := range live {
		if silent, _ := v.Silent(seen, x.Key); x.Key != m.self && fresh && silent >= m.suspectAfter {
			continue
		}
		alive = append(alive, x)
	}
	var alt []int
	if len(alive) < len(live) {
		alt = m.assigned.get(len(m.sh), alive)
	}
	nexts := make([]string, len(m.sh))
	for i := range m.sh {
		if owner != nil {
			o := live[owner[i]]
			if alt != nil && !containsKey(alive, o.Key) {
				o = alive[alt[i]]
			}
			nexts[i] = o.Key
		}
	}
	watch := m.watched(alive, nexts, selfLive && !winding && !m.leaving)
	m.wanted = 0
	for i := range m.sh {
		s := &m.sh[i]
		next := nexts[i]
		want := next == m.self && !winding && !m.leaving
		if want {
			m.wanted++
		}
		switch {
		case (want || watch[i]) && s.lk == nil:
			m.startShard(s, !want)
		case want && s.watching && !s.held && !s.stopped && s.lk.Leader().Holder == "":
			// Ours now, and given back: a watching lock would wait the
			// release out. (Held by a dead owner, it goes on as it is,
			// its wait under way.)
			s.stopped = true
			s.lk.Stop()
		case watch[i] && !s.held:
			// Waiting on it, should its owner die.
		case !want && s.lk != nil && !s.stopped && !s.held && !winding && !m.leaving && m.takingOver(s, alive):
			// A takeover under way from a member no longer alive: finish
			// it, then hand the shard over, rather than leave its next
			// owner to wait the lease out again from its first read.
		case !want && s.held && !s.stopped && selfLive && !winding && !m.leaving && next != "" && !v.Confirmed(next):
			// Held, and its next owner not yet seen to beat: a ghost in
			// the record (an entry no member wrote) must not take a shard
			// from its holder. A member that beats is confirmed within a
			// beat, and the shard goes to it then.
		case !want && s.lk != nil && !s.stopped:
			s.stopped, s.why = true, why
			if s.held {
				s.gaveBack, s.wakeTo = true, v.Addr(next)
			}
			s.lk.Stop()
		}
	}
}

// watched returns, with Watch, which shards would fall to us were their
// owner among alive to die (an all-false slice otherwise).
func (m *Campaign) watched(alive []Member, nexts []string, on bool) []bool {
	watch := make([]bool, len(m.sh))
	if !m.cfg.Watch || !on || len(alive) < 2 {
		return watch
	}
	for _, x := range alive {
		if x.Key == m.self {
			continue
		}
		without := removeKey(alive, x.Key)
		succ := m.assigned.get(len(m.sh), without)
		for i, next := range nexts {
			if next == x.Key && without[succ[i]].Key == m.self {
				watch[i] = true
			}
		}
	}
	return watch
}

// takingOver reports whether s's lock waits out a holder that is not among
// alive: a member that died or is suspected, or none we know.
func (m *Campaign) takingOver(s *shardLock, alive []Member) bool {
	ld := s.lk.Leader()
	return ld.Holder != "" && ld.Holder != m.cfg.ID && !containsKey(alive, Key(ld.Holder))
}

func (m *Campaign) startShard(s *shardLock, watching bool) {
	mk := m.cfg.Machine
	if watching {
		mk = m.watchMachine
	}
	mach, err := mk()
	if err != nil {
		m.fail(err)
		return
	}
	*s = shardLock{m: m, i: s.i, limit: s.limit, watching: watching}
	s.lk = new(lockcore.Lock)
	s.lk.InitMachine(s, ShardName(m.cfg.Name, s.i), mach, false, false)
	s.lk.HoldBarriers()
	s.lk.Start()
}

func removeKey(ms []Member, key string) []Member {
	out := make([]Member, 0, len(ms))
	for _, x := range ms {
		if x.Key != key {
			out = append(out, x)
		}
	}
	return out
}

func containsKey(ms []Member, key string) bool {
	for _, x := range ms {
		if x.Key == key {
			return true
		}
	}
	return false
}

// msHost is the Membership's host: the member's.
type msHost Campaign

func (h *msHost) Now() time.Time { return h.h.Now() }

func (h *msHost) Call(op election.Op) { h.h.Call(-1, op) }

func (h *msHost) Log(level slog.Level, msg string, args ...any) { h.h.Log(level, msg, args...) }

func (h *msHost) Changed(live []Member) {
	m := (*Campaign)(h)
	m.dirty = true
	m.h.Changed(live)
}

// A shard's lockcore.Host: the member's, for shard i.

func (s *shardLock) Now() time.Time { return s.m.h.Now() }

func (s *shardLock) Call(op election.Op, _ int) { s.m.h.Call(s.i, op) }

func (s *shardLock) Cancel() { s.m.h.Cancel(s.i) }

func (s *shardLock) Log(level slog.Level, msg string, args ...any) {
	s.m.h.Log(level, msg, append(args, "shard", s.i)...)
}

func (s *shardLock) Granted(t election.Term) {
	s.held = true
	s.m.held++
	s.m.h.Assigned(s.i, t)
}

// Busy: a shard's lock waits; it never answers busy.
func (s *shardLock) Busy(election.Leader) {}

// Refused: the store refused the shard for good (a waiting lock is
// refused nothing else).
func (s *shardLock) Refused(err error) { s.m.fail(err) }

func (s *shardLock) Publish(d driver.Snapshot) {
	if s.held {
		s.m.h.Publish(s.i, d)
	}
}

func (s *shardLock) Ended(t election.Term, r election.Reason) {
	if r == election.ReasonShutDown && s.stopped && !s.m.leaving && s.m.err == nil {
		r = s.why // given up to its next owner, or for a heartbeat that fails
	}
	if s.held {
		s.held = false
		s.m.held--
		s.m.h.Revoked(s.i, t, r)
	}
}

// Reschedule: the member reschedules after every event.
func (s *shardLock) Reschedule() {}

// WakeNext: a shard's lock keeps no wake record; the member wakes the
// shard's next owner itself.
func (s *shardLock) WakeNext(string) {}

func (s *shardLock) Retired() {
	if s.gaveBack && s.wakeTo != "" && !s.lk.GaveUp() {
		s.m.h.Log(slog.LevelDebug, "waking the shard's next owner", "shard", s.i, "addr", s.wakeTo)
		s.m.h.Wake(s.wakeTo, s.i)
	}
	s.lk, s.stopped, s.gaveBack, s.wakeTo = nil, false, false, ""
	s.m.dirty = true // wanted still? campaign again
}
