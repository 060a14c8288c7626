// Package election is tenure's decision logic: a pure state machine that
// implements the lease protocol of one candidate. It starts no goroutines,
// does no I/O and reads no clock: the driver hands it the current local time
// with every input and carries out the Output it returns (start a store call,
// deliver events, wake it up at a given instant). The same Machine runs inside
// tenure.Candidate and, single-threaded, inside the simulator.
//
// # Protocol
//
// Times are local readings of a clock whose rate stays within [1-ρ, 1+ρ] of
// true time (ρ = Config.MaxDrift). Only differences of such readings are used.
//
//   - Acquire: a follower that first saw version v of a record at local time a
//     (when the response arrived, or when the store's change feed told of v
//     with a record of the term the follower last read: NoticeRecord) writes
//     CAS(v, token+1) only when the record is released or absent, or when
//     now >= a + ttl×(1+ρ), ttl being the duration stored in the record (for
//     a holder and token seen before, the longest its records carried: a
//     duration edited down is an anomaly). Every read since a returned v,
//     else a restarts (unless the read found the version a feed event
//     replaced: its first sight stands).
//   - Lead: with s the local time at which the last write known to have
//     succeeded was sent, the machine leads while now < s + ttl×(1-ρ) - margin
//     (its own ttl). At that instant it emits EventDemoted, even with a
//     renewal in flight.
//   - Renew: RenewInterval after s, CAS(current version, same token). A
//     conflict demotes at once; an error retries with jittered backoff until
//     the deadline.
//   - Ambiguous writes: a write that failed with anything but a conflict may
//     have applied. Its nonce is remembered and the record is read back: our
//     nonce means it applied (at its send time), an unchanged version means it
//     did not (yet), anything else means the lease moved on.
//   - Release: after Stop and once the driver has finished the term's
//     callbacks, Release writes CAS(current version, released, same token).
//   - Tokens: an acquiring write carries the stored token + 1, and never a
//     token at or below the highest this machine has seen for the lease; a
//     write that creates the record carries max(highest seen + 1, now's Unix
//     time in milliseconds), so that a machine that never saw a lost record
//     still mints above the tokens issued before the loss. The
//     compare-and-swap makes the store itself order them.
//   - Lost records: a record that vanishes, or whose token goes below one
//     seen before (a restored backup), is treated like a silent holder: it is
//     taken only once every read for ttl×(1+ρ) (the longest ttl seen) found
//     it unchanged. A leader whose write finds it so demotes at once
//     (ReasonRecordLost). Each such sighting is reported as EventAnomaly.
//   - Callbacks first: after a term ends the machine does not campaign until
//     the driver reports, with CallbacksDone, that the term's callbacks have
//     returned.
//   - Read before writing: a takeover is sent only right after a read that
//     allowed it (within PollInterval), so a machine resumed from a long
//     pause reads first instead of writing with an old version.
package election

import (
	"errors"
	"fmt"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/leaderaddr"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// maxToken keeps tokens below 2^63 (see lease.Record.Validate).
const maxToken = 1<<63 - 1

// recentNonces is how many of its own write nonces a machine remembers, to
// tell its own writes from those of another process with the same ID.
const recentNonces = 8

// purpose says why an op was started.
type purpose uint8

const (
	doPoll     purpose = iota + 1 // follower read
	doAcquire                     // write to take the lease
	doRenew                       // leader's write to keep it
	doRelease                     // write to give it up
	doReadBack                    // read to resolve a write of unknown outcome
	doCheck                       // read before releasing: did a write of ours land?
	doResign                      // give the lease up and stay a follower (Resign)
)

// phase is where the machine is in its life; it only moves forward.
type phase uint8

const (
	running   phase = iota // campaigning, leading or following
	stopped                // Stop was called: no campaigns, no renewals
	releasing              // Release was called: give back what the store holds of ours
	done                   // nothing more will happen
)

// state is the machine's role.
type state uint8

const (
	following state = iota // observing the store; may campaign
	acquiring              // trying to take the lease with token m.token
	leading                // holding the lease with token m.token (announced or not)
)

// flight is one store call in flight, or a write awaiting read-back.
type flight struct {
	do   purpose
	sent time.Time
	// op is what the store is asked: its ID, and for a write the record and
	// the expected version. Output.Op points here.
	op Op
}

// Machine decides what one candidate does. It is not safe for concurrent use.
type Machine struct {
	cfg *Config // shared by NewShared; never changed

	// Local times are kept as offsets from epoch, the first instant the
	// machine was given: 8 bytes each rather than time.Time's 24, since a
	// Locker keeps a Machine per held lock. epoch.Add gives back the same
	// times, monotonic reading included.
	epoch time.Time

	// The latest state of the store we know of. The leader last reported
	// in an EventLeaderChanged is rec's (leaderOf).
	rec   lease.Record
	ver   lease.Version
	since instant // ver was first seen
	// The version a renewal the feed told of replaced (NoticeRecord), and
	// when it was first seen: a read that finds it again (the event was
	// forged, or late) restores that sight instead of starting the wait
	// over. NoVersion once a read has found anything.
	prevVer   lease.Version
	prevSince instant
	read      instant // the last answer that told us the record's state, or never

	// What the machine has seen of the lease over its life: no token it mints
	// is at or below maxSeen, and a lost record is waited out for maxTTL.
	maxSeen uint64
	maxTTL  time.Duration
	// termTTL is the longest duration seen in the records of rec's holder
	// and token: a takeover waits that out, so that a record whose duration
	// was shortened under its holder (a hand edit) cannot cut the term
	// the holder believes in.
	termTTL time.Duration
	nonces  [recentNonces]uint32 // our latest write nonces' low bits, for duplicate IDs
	first   instant              // the first answer

	// Our term (acquiring, leading) and our last confirmed write.
	// Our record is {cfg.ID, ownTok, cfg.LeaseDuration, cfg.Payload}: a
	// renewal or release writes it again with a new nonce, so only the
	// token is kept.
	token     uint64
	ownTok    uint64               // the token of our last confirmed write
	acqExpect lease.Version        // while acquiring: the version the takeover expects
	ownVer    lease.Version        // version of our last confirmed write, if any
	sent      instant              // when that write was sent (s)
	deadline  instant              // sent + the lead window, while leading
	holdUntil instant              // Resign: no campaign before this
	noticeAt  instant              // the notices' rate limit over all reads: its theoretical arrival time (GCRA)
	pending   map[string]time.Time // nonce → send time of writes of unknown outcome

	op         *flight // in flight
	unresolved *flight // write awaiting its read-back
	next       instant
	lastErr    error
	dupErr     *DuplicateIDError // sticky: another process writes with our ID

	// What the current input has produced so far (flush returns it).
	outOp     *Op
	outEvents []Event

	// The small fields, together: a Machine per held lock adds up (416
	// bytes, a size class of the allocator; a field more costs 32).
	lastID     uint32 // the last op's ID: ops are numbered from 1, skipping 0 when it wraps
	outAbandon uint32 // what the current input abandoned (an op's ID), or 0
	seen       bool
	exists     bool
	announced  bool // EventElected emitted and no EventDemoted yet
	failed     bool // a renewal failed with an error since the last confirmed write
	held       bool // a term ended and its callbacks have not returned: no campaign
	resigning  bool // Resign: our record is to be released once the callbacks returned
	gated      bool // the driver holds campaigning back (a fair lock's turn has not come)
	cold       bool // a follower other than the standby: polls every ColdPollInterval
	rewake     bool // a wake-up came while a read was in flight: read again after it
	renotice   bool // a renewal notice came while a read was in flight: read after it, if the rate allows
	noticing   bool // the read about to start answers a renewal notice
	noticed    bool // the last read answered a renewal notice: the next poll waits MaxPoll
	feedTimed  bool // the feed told of a renewal since the last read, timed from it: the next poll waits FeedSilence
	fresh      bool // the next read must be strong, not stale (StaleReads)
	changed    bool // what Leader, Term or Err report changed since the last Output
	phase      phase
	state      state
	nextDo     purpose // scheduled work, 0 if none
	attempt    uint8   // failures since the last success, for backoff (at most 62)
	nonceC     uint8   // writes counted in [0, 2×recentNonces): the next slot is nonceC%recentNonces
	renoticeOf uint32  // with renotice: the hash of the version the notice named, or 0 if none
}

// New returns a Machine for cfg, or the first problem Config.Validate finds.
func New(cfg Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newMachine(&cfg), nil
}

// NewShared is New for a configuration that many Machines share (a
// Locker's locks): cfg must not change while any of them runs.
func NewShared(cfg *Config) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newMachine(cfg), nil
}

func newMachine(cfg *Config) *Machine {
	return &Machine{cfg: cfg, read: never, changed: true}
}

// instant is a local time as an offset from the Machine's epoch.
type instant time.Duration

// never is the read of a machine that has had no answer: older than any.
const never = instant(math.MinInt64)

// at returns now as an instant; the first call fixes the epoch.
func (m *Machine) at(now time.Time) instant {
	if m.epoch.IsZero() {
		m.epoch = now
	}
	return instant(now.Sub(m.epoch))
}

// time returns i as a local time. Before the epoch is fixed every instant
// is 0, and its time the zero time.
func (m *Machine) time(i instant) time.Time { return m.epoch.Add(time.Duration(i)) }

// window returns the lead window for our own LeaseDuration.
func (m *Machine) window() time.Duration {
	return LeadWindow(m.cfg.LeaseDuration, m.cfg.MaxDrift, m.cfg.Margin)
}

// leaderOf returns the leader that the state of the record shows.
func leaderOf(found bool, rec lease.Record) Leader {
	if !found || rec.Released {
		return Leader{}
	}
	addr, payload := leaderaddr.Split(rec.Payload)
	return Leader{Holder: rec.Holder, Token: fencing.Token(rec.Token), Payload: payload, Addr: addr}
}

// Start begins campaigning: the first Output asks for a read.
func (m *Machine) Start(now time.Time) Output {
	m.schedule(now, doPoll)
	return m.flush(now)
}

// Tick lets time pass. The driver calls it at Output.Wake.
func (m *Machine) Tick(now time.Time) Output { return m.flush(now) }

// Done reports the outcome of an Op. Results of abandoned or unknown ops are
// ignored. A result that arrives at or after the lead deadline cannot save the
// term: the deadline is checked first.
func (m *Machine) Done(now time.Time, res Result) Output {
	m.checkDeadline(now)
	if m.op != nil && m.op.op.ID == res.ID {
		op := m.op
		m.op = nil
		m.handle(now, op, res)
	}
	return m.flush(now)
}

// Stop ends campaigning: a term in progress ends with ReasonShutDown, nothing
// new is started, and an op in flight is left to finish. The driver then waits
// for the term's callbacks to return and calls Release.
func (m *Machine) Stop(now time.Time) Output {
	if m.phase == running {
		m.phase = stopped
		if m.state == leading {
			m.demote(now, ReasonShutDown)
		}
		m.nextDo = 0
	}
	return m.flush(now)
}

// Release gives up the lease if the store still holds a write of ours,
// resolving writes of unknown outcome first. Output.Done reports the end.
func (m *Machine) Release(now time.Time) Output {
	if m.phase == running {
		m.Stop(now)
	}
	m.phase = max(m.phase, releasing)
	if m.op != nil && m.op.do == doPoll {
		// A follower's read changes nothing in the store: decide from what
		// is known rather than wait for it (up to OpTimeout).
		m.outAbandon = uint32(m.op.op.ID)
		m.op = nil
	}
	return m.flush(now)
}

// Resign ends a term in progress (ReasonResigned) and, once the driver
// reports that its callbacks returned (CallbacksDone), gives the lease back
// with its token kept, as Release does, while the machine keeps running: it
// campaigns again only holdOff after now. An acquiring write that lands
// meanwhile is given back too. Resigning reports when it is over.
func (m *Machine) Resign(now time.Time, holdOff time.Duration) Output {
	return m.resign(now, holdOff, ReasonResigned)
}

// HandOver is Resign for a candidate of higher priority: the term ends
// with ReasonHandedOver. The machine follows the lease meanwhile and, if
// it still finds it free once holdOff is over, takes it back, so that a
// candidate that died before it took the lease is not waited on.
func (m *Machine) HandOver(now time.Time, holdOff time.Duration) Output {
	return m.resign(now, holdOff, ReasonHandedOver)
}

func (m *Machine) resign(now time.Time, holdOff time.Duration, why Reason) Output {
	// A term whose deadline passed (a process resumed from a pause, whose
	// first event is this) ended by its clock, not by a hand-over.
	m.checkDeadline(now)
	if m.phase == running {
		m.holdUntil = m.at(now.Add(holdOff))
		switch m.state {
		case leading:
			m.resigning = true
			m.demote(now, why)
			if !m.held { // never announced: nothing to wait for
				m.schedule(now, doResign)
			}
		case acquiring:
			m.resigning = true
		}
	}
	return m.flush(now)
}

// Gate holds campaigning back (closed) or lets it go on (open): while
// closed, the machine only reads, every GatedPoll. A fair lock keeps it
// closed until its waiter is the oldest in the queue.
func (m *Machine) Gate(now time.Time, closed bool) Output {
	if m.gated != closed {
		m.gated = closed
		if !closed && m.state == following && m.op == nil && (m.nextDo == 0 || m.nextDo == doPoll) {
			if m.free() {
				m.follow(now)
			} else {
				// Our turn came, most likely because the one before us took
				// the lease, and it may have given it back since: read at
				// once rather than at the next poll.
				m.fresh = true
				m.schedule(now, doPoll)
			}
		}
	}
	return m.flush(now)
}

// SetCold makes the machine a cold follower, which polls every
// ColdPollInterval (the Config must have one), or a hot one again, which
// polls every PollInterval: the standby. Turning hot brings a later poll
// forward. Only how often it reads changes, never when it may take the
// lease (the wait runs from when the record was first seen unchanged).
func (m *Machine) SetCold(now time.Time, cold bool) Output {
	if m.cold != cold && (!cold || m.cfg.ColdPollInterval > 0) {
		m.cold = cold
		if !cold && m.state == following && m.op == nil && (m.nextDo == doPoll || m.nextDo == doAcquire) {
			m.follow(now) // plan the next step anew at the hot cadence
		}
	}
	return m.flush(now)
}

// Wake is a hint that the lease may have changed (a release): a follower
// with nothing in flight reads at once instead of at its next poll. It
// carries no authority: what the read finds decides, as always.
func (m *Machine) Wake(now time.Time) Output {
	switch {
	case m.phase != running || m.state != following:
	case m.op == nil && (m.nextDo == doPoll || m.nextDo == doAcquire):
		m.fresh = true
		m.schedule(now, doPoll) // after it, follow schedules a takeover again
	case m.op != nil && m.op.do == doPoll:
		// That read may have left before the change it was woken for.
		m.rewake = true
	}
	return m.flush(now)
}

// Notice is a renewal notice: the leader says it has just renewed. The
// standby (a hot follower) reads at once, strongly, so that it first sees
// each renewal a round trip or two after it was made and its takeover wait
// runs from then, not from a poll later; its next routine poll then waits
// the longest poll (MaxPoll), for the next notice to come first. A notice
// that comes while a read is in flight is answered after it: that read may
// have left before the renewal landed.
//
// v is the version the renewal wrote, where the notice says (a store's
// change feed does), else NoVersion. A notice of the version the last read
// found tells nothing new (a routine poll came first): it is not read
// again, and the next poll waits the longest poll from that read, as after
// a read on a notice. So a follower reads once per renewal, not a poll and
// a notice for the same one.
//
// Like Wake, a notice carries no authority: it only moves a read, and what
// the read finds decides. Notices are rate-limited with every read counted
// (a burst of two, then one every 0.9×PollInterval, the shortest routine
// poll), so that a flood of forged or duplicated ones makes the standby
// read at most about as often as its fastest poll; cold followers ignore
// them. One that names the version read moves the next poll to MaxPoll
// after that read at the latest, so a flood of those cannot hold polls
// back either.
func (m *Machine) Notice(now time.Time, v lease.Version) Output {
	known := v != lease.NoVersion && m.seen && m.exists && v == m.ver
	switch {
	case m.phase != running || m.state != following || m.cold || m.gated:
	case m.op == nil && m.nextDo == doPoll && known:
		// A routine poll is pushed back; a read due now (a wake-up's, a
		// gate's) is not.
		if at := m.read + instant(MaxPoll(m.cfg.PollInterval)); m.next > m.at(now) && at > m.next {
			m.noticed = true
			m.schedule(m.time(at), doPoll)
		}
	case m.op == nil && (m.nextDo == doPoll || m.nextDo == doAcquire) && !known:
		m.noticeRead(now)
	case m.op != nil && m.op.do == doPoll:
		if known {
			m.noticed = true // the read in flight finds it or newer
		} else {
			m.renotice, m.renoticeOf = true, versionHash(v)
		}
	}
	return m.flush(now)
}

// NoticeRecord is a renewal told with its record, by the store's change
// feed: version v holds rec. A follower whose last read found the same
// term (the same holder, token and lease duration, not released) times the
// lease from now, as it would from a read that found v: the write was made
// before the feed told of it, so the wait starts no sooner than a read's
// would. It reads only to act: before its takeover, which is a
// compare-and-swap on the version last heard of (a renewal the feed lost
// makes it fail, and costs a read), and when the feed has been silent for
// FeedSilence. Any other record (a new holder or token, a lease duration
// it has not read, a release) it has not seen, and never times: that is a
// notice of v, read within the notices' rate limit. Like Notice, it
// carries no authority beyond delaying a takeover.
func (m *Machine) NoticeRecord(now time.Time, v lease.Version, rec lease.Record) Output {
	if m.phase != running || m.state != following {
		return m.flush(now)
	}
	if v == lease.NoVersion || !m.seen || !m.exists || m.rec.Released || rec.Released ||
		rec.Holder != m.rec.Holder || rec.Token != m.rec.Token || rec.Duration != m.rec.Duration {
		return m.Notice(now, v)
	}
	if v == m.ver {
		// Told again (a duplicate, a late event): nothing new, and it
		// must not hold back the read of a feed gone silent.
		return m.flush(now)
	}
	// A renewal of the term read: its version is first seen now. The
	// record kept is the one read (its payload, its nonce): the feed may
	// not carry them, and a renewal does not change them.
	m.prevVer, m.prevSince = m.ver, m.since
	m.ver, m.since, m.changed = v, m.at(now), true
	m.read, m.feedTimed = m.at(now), true
	if m.op == nil && (m.nextDo == doPoll || m.nextDo == doAcquire) && !m.fresh {
		m.follow(now) // the takeover, or the silent feed's read, from now
	}
	return m.flush(now)
}

// FeedSilence is how long a follower that times renewals from the store's
// change feed (Machine.NoticeRecord) waits for the next before it reads:
// the longest poll, and a quarter poll more for the feed's own delays.
func FeedSilence(t Timing) time.Duration { return MaxPoll(t.PollInterval) + t.PollInterval/4 }

// versionHash is what a Machine keeps of a notice's version while a read
// is in flight (renoticeOf): 4 bytes fit where the fields' padding was. A
// collision costs only the read after it, which a poll makes up.
func versionHash(v lease.Version) uint32 {
	if v == lease.NoVersion {
		return 0
	}
	h := uint32(2166136261) // FNV-1a
	for i := range len(v) {
		h = (h ^ uint32(v[i])) * 16777619
	}
	return h | 1 // never 0: 0 is "no version"
}

// noticeRead reads now for a notice, within the rate limit: every read
// counts against it (readCount), and a notice is refused once reads are
// more than one ahead of one every 0.9×PollInterval.
func (m *Machine) noticeRead(now time.Time) {
	if m.noticeAt-m.at(now) > m.noticeEvery() { // a burst of two
		return
	}
	m.fresh, m.noticing = true, true
	m.schedule(now, doPoll)
}

// noticeEvery is the notices' rate: the shortest routine poll.
func (m *Machine) noticeEvery() instant {
	return instant(m.cfg.PollInterval - m.cfg.PollInterval/10)
}

// Resigning reports whether a Resign has yet to give the lease back.
func (m *Machine) Resigning() bool { return m.resigning && m.phase == running }

// CallbacksDone tells the machine that every callback of the term that
// ended last has returned: from now on it may campaign again. Until then it
// only polls, so that a term whose OnElected is still running (it ignored its
// context) cannot overlap a new term of the same candidate.
func (m *Machine) CallbacksDone(now time.Time) Output {
	if m.held {
		m.held = false
		switch {
		case m.resigning && m.op == nil:
			m.schedule(now, doResign)
		case m.state == following && m.op == nil && (m.nextDo == 0 || m.nextDo == doPoll):
			m.follow(now)
		}
	}
	return m.flush(now)
}

// Leading reports whether the machine leads at now: elected, and now before
// the lead deadline.
func (m *Machine) Leading(now time.Time) bool {
	return m.state == leading && m.announced && now.Before(m.time(m.deadline))
}

// Term returns the current term and true while one is announced.
func (m *Machine) Term() (Term, bool) {
	if !m.announced {
		return Term{}, false
	}
	return m.term(), true
}

// Config returns the Machine's configuration; it must not be changed.
func (m *Machine) Config() *Config { return m.cfg }

// Leader returns the leader as last observed in the store.
func (m *Machine) Leader() Leader { return leaderOf(m.exists, m.rec) }

// LeaderUntil returns the local time until which the term of Leader is
// known to be live: its record's lease, counted from this machine's first
// sight of that version of the record (the holder wrote it no later). Zero
// when there is no leader.
func (m *Machine) LeaderUntil() time.Time {
	if !m.exists || m.rec.Released {
		return time.Time{}
	}
	return m.time(m.since).Add(m.rec.Duration)
}

// OwnVersion returns the version of this machine's last write known to
// have applied, while it leads (what a renewal notice names); NoVersion
// otherwise.
func (m *Machine) OwnVersion() lease.Version {
	if m.state != leading {
		return lease.NoVersion
	}
	return m.ownVer
}

// Err returns the last store error other than a conflict or not-found, or
// nil; or, once another process was seen writing with this machine's ID, a
// *DuplicateIDError for the rest of the run.
func (m *Machine) Err() error {
	if m.lastErr == nil && m.dupErr != nil {
		return m.dupErr
	}
	return m.lastErr
}

func (m *Machine) term() Term {
	_, payload := leaderaddr.Split(m.cfg.Payload)
	return Term{Holder: m.cfg.ID, Token: fencing.Token(m.token), Deadline: m.time(m.deadline), Payload: payload}
}

// flush runs whatever is due at now and returns the accumulated Output.
func (m *Machine) flush(now time.Time) Output {
	for {
		m.checkDeadline(now)
		if m.op != nil && !now.Before(m.op.sent.Add(m.cfg.OpTimeout)) {
			op := m.op
			m.op = nil
			m.outAbandon = uint32(op.op.ID)
			last := m.lastErr
			var te *TimeoutError
			if errors.As(last, &te) {
				last = te.Last
			}
			m.handle(now, op, Result{ID: op.op.ID, Err: &TimeoutError{Op: op.do.String(), After: m.cfg.OpTimeout, Last: last}})
			continue
		}
		if m.phase == releasing && m.op == nil && m.nextDo == 0 {
			m.releaseNext(now)
		}
		if m.op == nil && m.nextDo != 0 && m.at(now) >= m.next {
			m.start(now)
			continue
		}
		break
	}
	out := Output{Op: m.outOp, Abandon: uint64(m.outAbandon), Events: m.outEvents, Unchanged: !m.changed}
	m.outOp, m.outAbandon, m.outEvents, m.changed = nil, 0, nil, false
	switch {
	case m.phase == done:
		out.Done = true
		return out
	case m.op != nil:
		out.Wake = m.op.sent.Add(m.cfg.OpTimeout)
	case m.nextDo != 0:
		out.Wake = m.time(m.next)
	}
	if m.state == leading {
		if d := m.time(m.deadline); out.Wake.IsZero() || d.Before(out.Wake) {
			out.Wake = d
		}
	}
	return out
}

func (m *Machine) checkDeadline(now time.Time) {
	if m.state == leading && m.at(now) >= m.deadline {
		reason := ReasonExpired
		if m.failed {
			reason = ReasonStoreUnavailable
		}
		m.demote(now, reason)
	}
}

func (m *Machine) emit(e Event) { m.outEvents = append(m.outEvents, e) }

// demote ends our term. A write of ours still in flight may land; its result
// is then handled as a follower's.
func (m *Machine) demote(now time.Time, r Reason) {
	if m.announced {
		m.announced, m.changed = false, true
		m.held = m.phase == running
		m.emit(Event{Kind: EventDemoted, Term: m.term(), Reason: r})
	}
	m.state = following
	m.follow(now)
}

func (m *Machine) schedule(at time.Time, do purpose) {
	m.next, m.nextDo = m.at(at), do
}

// retry schedules do again after a jittered, growing backoff.
func (m *Machine) retry(now time.Time, do purpose) {
	if m.phase != running && do != doRelease && do != doCheck {
		return // a pending nonce is resolved by Release instead
	}
	d := m.backoff()
	if m.attempt < 62 {
		m.attempt++
	}
	m.schedule(now.Add(d), do)
}

// backoff returns the wait before the next retry (Backoff).
func (m *Machine) backoff() time.Duration { return Backoff(m.cfg.Timing, int(m.attempt), m.cfg.Rand) }

// Backoff returns the wait before retrying after attempt failures in a row
// since the last answer (0 for the first): RetryMin doubled for each, capped
// at RetryMax, then drawn uniformly from its upper half. The cap is checked
// before shifting, so no lease is long enough to overflow it.
func Backoff(t Timing, attempt int, rnd *rand.Rand) time.Duration {
	d := t.RetryMax
	if attempt >= 0 && attempt < 62 && t.RetryMin <= t.RetryMax>>attempt {
		d = t.RetryMin << attempt
	}
	return d/2 + time.Duration(rnd.Int64N(int64(d/2)+1))
}

// pollAfter returns the next poll instant: PollInterval moved by up to 10%
// either way at random, so that followers do not read in lockstep and read
// as often as configured on average (MaxPoll is the longest wait).
func (m *Machine) pollAfter(now time.Time) time.Time {
	d := m.cfg.PollInterval
	switch {
	case m.gated:
		d = GatedPoll(m.cfg.Timing)
	case m.cold:
		d = m.cfg.ColdPollInterval
	case m.feedTimed:
		// Timing from the feed: this read is for a feed gone silent.
		return now.Add(FeedSilence(m.cfg.Timing))
	case m.noticed:
		// Reading on notices: this poll is the fallback for when they
		// stop, late enough that the next one comes first.
		return now.Add(MaxPoll(d))
	}
	return now.Add(d - d/10 + time.Duration(m.cfg.Rand.Int64N(int64(d/5)+1)))
}

// GatedPoll is how often a gated follower (a fair waiter behind the head
// of its queue) reads on average: once a lease, or a cold poll if longer.
// It cannot take the lease before its gate opens, and it reads afresh when
// the gate opens; it reads at all only so that the takeover wait it may
// owe then has begun (it runs from the first sight of a version).
func GatedPoll(t Timing) time.Duration { return max(t.LeaseDuration, t.ColdPollInterval) }

// MaxPoll returns the longest wait between a follower's polls: poll + 10%.
func MaxPoll(poll time.Duration) time.Duration { return poll + poll/10 }

// nonce returns a new write nonce: 16 hex digits of randomness, of which
// the low 32 bits are kept among the latest few (4 bytes each, for many
// held locks): another process's nonce passes for ours with odds of 2^-29
// at most, and that only hides a duplicate ID for one write.
func (m *Machine) nonce() string {
	v := m.cfg.Rand.Uint64()
	m.nonces[m.nonceC%recentNonces] = uint32(v)
	if m.nonceC++; m.nonceC == 2*recentNonces {
		m.nonceC = recentNonces // a full ring stays full
	}
	var b [16]byte
	return string(strconv.AppendUint(b[:0], v, 16)) // unpadded: parse as written
}

// ours reports whether nonce is one of our latest writes'.
func (m *Machine) ours(nonce string) bool {
	v, err := strconv.ParseUint(nonce, 16, 64)
	if err != nil {
		return false
	}
	for i, n := range m.nonces {
		if i < int(m.nonceC) && n == uint32(v) {
			return true
		}
	}
	return false
}

func (p purpose) String() string {
	switch p {
	case doPoll:
		return "read"
	case doAcquire:
		return "acquire"
	case doRenew:
		return "renew"
	case doRelease:
		return "release"
	case doReadBack:
		return "read back"
	case doCheck:
		return "check before release"
	case doResign:
		return "resign"
	}
	return "op"
}

// start begins the scheduled work.
func (m *Machine) start(now time.Time) {
	do := m.nextDo
	m.nextDo = 0
	switch do {
	case doPoll:
		// A follower's routine poll may be served stale; the first read,
		// and one asked for fresh (a wake-up, a gate, a suspect answer),
		// may not.
		stale := m.cfg.StaleReads && m.seen && m.state == following && !m.fresh
		m.fresh = false
		m.noticed, m.noticing, m.feedTimed = m.noticing, false, false
		m.noticeAt = max(m.noticeAt, m.at(now)) + m.noticeEvery() // the notices' rate limit counts every read
		m.send(now, flight{do: do, op: Op{Kind: OpGet, Stale: stale}})
	case doReadBack:
		m.send(now, flight{do: do, op: Op{Kind: OpGet}})
	case doAcquire:
		if m.phase != running {
			return
		}
		if m.state == leading { // obsolete: keep renewing instead
			m.schedule(m.time(m.sent).Add(m.cfg.RenewInterval), doRenew)
			return
		}
		if m.held || m.gated || now.Before(m.time(m.holdUntil)) {
			m.schedule(m.pollAfter(now), doPoll)
			return
		}
		if now.Sub(m.time(m.read)) > m.cfg.PollInterval {
			// What we know is old (a pause, a slow callback): read before
			// writing rather than send a write bound to conflict.
			m.send(now, flight{do: doPoll, op: Op{Kind: OpGet}})
			return
		}
		expect := lease.NoVersion
		if m.exists {
			expect = m.ver
		}
		if m.state != acquiring || m.acqExpect != expect {
			token := m.mint(now)
			if token > maxToken {
				m.lastErr, m.changed = fmt.Errorf("election: token %d is the last one: the lease cannot be taken again", token-1), true
				m.schedule(m.pollAfter(now), doPoll)
				return
			}
			m.state, m.token, m.acqExpect, m.pending = acquiring, token, expect, nil
			m.changed = true
		} else if m.cfg.ClockTokens {
			// A retry, on a store that may lose writes: mint again from
			// the clock. A takeover of another's that the store lost may
			// have landed since the first attempt's token was minted, a
			// moment apart; this one is above it by the time the failover
			// took. An earlier attempt that lands yet is known by its
			// nonce, and its token is the term's (confirm).
			m.token = max(m.token, m.mint(now))
		}
		token := m.token
		rec := lease.Record{Holder: m.cfg.ID, Token: token, Duration: m.cfg.LeaseDuration, Payload: m.cfg.Payload}
		m.write(now, doAcquire, rec, expect)
	case doRenew:
		if m.phase != running {
			return
		}
		if m.state != leading {
			// The term ended while a retry of its renewal was pending (a
			// read-back outlived the deadline): carry on as a follower.
			m.follow(now)
			return
		}
		m.write(now, doRenew, m.ownRecord(), m.ownVer)
	case doResign:
		if m.phase != running {
			return // Release gives it back
		}
		if m.ownVer == lease.NoVersion || !m.exists || m.ver != m.ownVer || m.rec.Released {
			m.resigning = false // nothing of ours to give back
			m.follow(now)
			return
		}
		rec := m.ownRecord()
		rec.Released = true
		m.write(now, doResign, rec, m.ownVer)
	case doRelease, doCheck:
		if m.ownVer == lease.NoVersion {
			m.finish()
			return
		}
		rec := m.ownRecord()
		rec.Released = true
		m.write(now, doRelease, rec, m.ownVer)
	}
}

func (m *Machine) write(now time.Time, do purpose, rec lease.Record, expect lease.Version) {
	rec.Nonce = m.nonce()
	rec.WrittenAt = time.Time{} // the driver's to fill in with wall time
	m.send(now, flight{do: do, op: Op{Kind: OpPut, Record: rec, Expect: expect}})
}

func (m *Machine) send(now time.Time, fl flight) {
	f := &fl
	if m.lastID++; m.lastID == 0 {
		m.lastID = 1 // 0 means no op
	}
	f.op.ID, f.sent = uint64(m.lastID), now
	m.op = f
	m.outOp = &f.op
}

// mint returns the token of a takeover at now: above the stored token and
// every token seen. For a record that does not exist, or whose token went
// below one seen, it is also at least the wall time in Unix milliseconds, so
// that it exceeds the tokens of terms this machine never saw (given clocks
// within minutes of each other); with ClockTokens, every takeover is.
func (m *Machine) mint(now time.Time) uint64 {
	t := max(m.rec.Token, m.maxSeen) + 1
	if !m.exists || m.rec.Token < m.maxSeen || m.cfg.ClockTokens {
		wall := now
		if m.cfg.Wall != nil {
			wall = m.cfg.Wall()
		}
		t = max(t, uint64(max(wall.UnixMilli(), 1)))
	}
	return t
}

func (m *Machine) handle(now time.Time, op *flight, res Result) {
	answered := res.Err == nil || errors.Is(res.Err, lease.ErrConflict) || errors.Is(res.Err, lease.ErrNotFound)
	switch {
	case answered && op.do != doReadBack && op.do != doCheck:
		m.changed = m.changed || m.lastErr != nil
		m.lastErr, m.attempt = nil, 0
	case answered:
		// The read after a failed write answers for the read, not the
		// write: a store that answers reads and refuses writes (a
		// permission missing, writes throttled) must not see the
		// backoff reset by it, or the writes repeat every RetryMin.
	default:
		m.lastErr, m.changed = res.Err, true
	}
	if !answered && !errors.Is(res.Err, ErrTimeout) && errors.Is(res.Err, lease.ErrInvalidRecord) && m.state == leading {
		// The store holds a record we cannot read: someone else wrote it,
		// so it is no longer provably ours.
		m.emit(Event{Kind: EventAnomaly, Err: res.Err})
		m.demote(now, ReasonInvalidRecord)
	}
	switch op.do {
	case doPoll:
		if op.op.Stale && m.suspect(res) {
			// It may be an old state: read strongly before deciding.
			m.fresh = true
			m.schedule(now, doPoll)
			return
		}
		switch {
		case res.Err == nil:
			m.observe(now, true, res.Record, res.Version)
		case errors.Is(res.Err, lease.ErrNotFound):
			m.observe(now, false, lease.Record{}, lease.NoVersion)
		default:
			if m.phase == running {
				m.schedule(m.pollAfter(now), doPoll)
			}
			return
		}
		m.follow(now)
		if m.rewake {
			m.rewake = false
			if m.nextDo == doPoll { // nothing to take yet: read once more
				m.fresh = true
				m.schedule(now, doPoll)
			}
		}
		if m.renotice {
			m.renotice = false
			switch {
			case m.renoticeOf != 0 && m.renoticeOf == versionHash(m.ver):
				// The read found what the notice told of: it answered it,
				// and the routine poll after it waits the longest poll (not
				// a read due now: a wake-up's).
				if m.nextDo == doPoll && m.next > m.at(now) {
					m.noticed = true
					m.schedule(m.pollAfter(now), doPoll)
				}
			case m.nextDo == doPoll || m.nextDo == doAcquire:
				m.noticeRead(now)
			}
			m.renoticeOf = 0
		}
	case doReadBack:
		w := m.unresolved
		m.unresolved = nil
		switch {
		case res.Err == nil:
			m.resolve(now, w, true, res.Record, res.Version)
		case errors.Is(res.Err, lease.ErrNotFound):
			m.resolve(now, w, false, lease.Record{}, lease.NoVersion)
		default:
			// Still unknown. Retry the write itself: should the first one have
			// landed, the retry conflicts and the conflict resolves it.
			m.retry(now, w.do)
		}
	default:
		switch {
		case res.Err == nil:
			m.confirm(now, op.do, op.sent, op.op.Record, res.Version)
		case errors.Is(res.Err, lease.ErrConflict):
			// A conflict is certain: this write did not apply.
			var ce *lease.ConflictError
			if errors.As(res.Err, &ce) {
				m.resolve(now, op, ce.Found, ce.Current, ce.Version)
			} else {
				m.readBack(now, op)
			}
		default:
			if op.do == doRenew && m.state == leading {
				m.failed = true
			}
			if m.pending == nil {
				m.pending = make(map[string]time.Time)
			}
			m.pending[op.op.Record.Nonce] = op.sent
			m.readBack(now, op)
		}
	}
}

// suspect reports whether a stale answer would have the follower act, or
// report an anomaly: the lease free (released, or absent), or a token below
// one seen (a record gone back). A stale read shows such states when they
// are old; only a strong read may decide on them.
func (m *Machine) suspect(res Result) bool {
	switch {
	case errors.Is(res.Err, lease.ErrNotFound):
		return true
	case res.Err != nil:
		return false
	}
	return res.Record.Released || res.Record.Token < m.maxSeen
}

func (m *Machine) readBack(now time.Time, w *flight) {
	m.unresolved = w
	m.schedule(now, doReadBack)
}

// resolve decides, from what the store holds now, the fate of write w that
// did not come back as a success.
func (m *Machine) resolve(now time.Time, w *flight, found bool, cur lease.Record, ver lease.Version) {
	if found && cur.Holder == m.cfg.ID && (cur.Token == m.token || m.state == acquiring) {
		if sent, ok := m.pending[cur.Nonce]; ok {
			m.confirm(now, w.do, sent, cur, ver)
			return
		}
	}
	if found == (w.op.Expect != lease.NoVersion) && ver == w.op.Expect {
		// Nothing changed: w did not apply, so far. Its nonce stays pending in
		// case it lands late.
		m.read = m.at(now)
		if w.do == doCheck {
			m.pending = nil // none of ours landed
		} else {
			m.retry(now, w.do)
		}
		return
	}
	// The lease moved on without us. Versions never repeat, so no write of
	// ours that expected an older one can land any more.
	m.pending = nil
	if w.do == doRenew && m.state == leading {
		// Another holder minted a higher token: lost. Absent, a lower token,
		// or our own term's record at another version (an earlier write of
		// ours, written back): the record was lost or restored.
		reason := ReasonLost
		if !found || cur.Token < m.token || cur.Token == m.token && cur.Holder == m.cfg.ID {
			reason = ReasonRecordLost
		}
		m.demote(now, reason)
	}
	m.observe(now, found, cur, ver)
	switch {
	case w.do == doRelease || w.do == doCheck || m.phase >= releasing:
		m.finish()
	case w.do == doResign:
		m.resigning = false
		m.follow(now)
	case m.state == acquiring:
		m.state, m.pending = following, nil
		m.follow(now)
	default:
		m.follow(now)
	}
}

// confirm records a write of ours known to have applied, sent at sent.
func (m *Machine) confirm(now time.Time, do purpose, sent time.Time, rec lease.Record, ver lease.Version) {
	m.pending, m.attempt, m.failed = nil, 0, false
	if m.state == acquiring {
		m.token = rec.Token // the attempt that landed: with ClockTokens, maybe an earlier one
	}
	m.ownVer, m.ownTok = ver, rec.Token
	m.observe(now, true, rec, ver)
	switch {
	case rec.Released && m.phase == running: // Resign gave it back
		m.state, m.resigning = following, false
		m.follow(now)
		return
	case rec.Released:
		m.finish()
		return
	case m.phase >= releasing:
		// A write of ours landed late; release that version instead.
		m.schedule(now, doRelease)
		return
	case m.state == following:
		// A renewal that landed after the term ended: the record is ours, but
		// the term is over. Treat it like anyone else's.
		m.follow(now)
		return
	}
	if s := m.at(sent); m.state == acquiring || s > m.sent {
		m.sent = s
	}
	m.state = leading
	m.deadline, m.changed = m.sent+instant(m.window()), true
	if m.phase != running {
		return // held, not announced; Release gives it back
	}
	if m.resigning && !m.announced {
		m.schedule(now, doResign) // an acquire that landed after Resign
		return
	}
	if !m.announced && now.Before(m.time(m.deadline)) {
		m.announced = true // m.changed: with the deadline
		m.emit(Event{Kind: EventElected, Term: m.term()})
	}
	m.schedule(m.time(m.sent).Add(m.cfg.RenewInterval), doRenew)
}

// observe records what the store holds and reports a change of leader.
func (m *Machine) observe(now time.Time, found bool, rec lease.Record, ver lease.Version) {
	if !m.seen || found != m.exists || ver != m.ver {
		m.since = m.at(now)
		if found && ver == m.prevVer {
			m.since = m.prevSince // its first sight stands: one version is one record
		}
		m.inspect(now, found, rec)
		m.changed = true // one version is one record
		m.timeTerm(found, rec)
	}
	was := leaderOf(m.exists, m.rec)
	m.read, m.prevVer = m.at(now), lease.NoVersion
	m.seen, m.exists, m.rec, m.ver = true, found, rec, ver
	if found {
		m.maxSeen, m.maxTTL = max(m.maxSeen, rec.Token), max(m.maxTTL, rec.Duration)
	}
	if l := leaderOf(found, rec); l.Holder != was.Holder || l.Token != was.Token {
		m.emit(Event{Kind: EventLeaderChanged, Leader: l})
	}
}

// inspect reports what a newly seen state of the record says about the
// store and about our ID, before it is recorded.
func (m *Machine) inspect(now time.Time, found bool, rec lease.Record) {
	switch {
	case !found && m.maxSeen > 0:
		m.emit(Event{Kind: EventAnomaly, Err: &RecordLostError{Seen: m.maxSeen}})
	case found && rec.Token < m.maxSeen:
		m.emit(Event{Kind: EventAnomaly, Err: &RecordLostError{Seen: m.maxSeen, Found: true, Token: rec.Token}})
	}
	// Records of an earlier process with our ID (a restart) may show up
	// during our first lease: its writes can still be on the wire. Any later
	// write with our ID that we did not make is another process's.
	if !m.seen {
		m.first = m.at(now)
	}
	if found && m.seen && rec.Holder == m.cfg.ID && !m.ours(rec.Nonce) && now.Sub(m.time(m.first)) > m.cfg.LeaseDuration {
		m.dupErr, m.changed = &DuplicateIDError{ID: m.cfg.ID, Token: rec.Token}, true
		m.emit(Event{Kind: EventAnomaly, Err: m.dupErr})
	}
}

// timeTerm keeps termTTL for a newly seen record, before it is recorded:
// the same holder and token keep the longest duration seen, and a shorter
// one is reported; another holder or token starts over.
func (m *Machine) timeTerm(found bool, rec lease.Record) {
	switch {
	case !found:
	case m.exists && rec.Holder == m.rec.Holder && rec.Token == m.rec.Token:
		if rec.Duration < m.termTTL && !rec.Released {
			m.emit(Event{Kind: EventAnomaly, Err: &shrunkError{holder: rec.Holder, token: rec.Token, was: m.termTTL, now: rec.Duration}})
		}
		m.termTTL = max(m.termTTL, rec.Duration)
	default:
		m.termTTL = rec.Duration
	}
}

// shrunkError reports a record whose lease duration went down while its
// holder and token stayed: no holder writes that (a term keeps its
// duration), so something else edited the record.
type shrunkError struct {
	holder string
	token  uint64
	was    time.Duration
	now    time.Duration
}

func (e *shrunkError) Error() string {
	return fmt.Sprintf("lease record of %q (token %d) now says its lease lasts %v, down from %v, with no new term: edited by hand or by another tool; it is waited out for %v", e.holder, e.token, e.now, e.was, e.was)
}

// free reports whether the lease may be taken at once: released, or absent
// and never seen. A record that vanished, or whose token went below one seen
// before, is not free: it might be a live holder's whose record was lost.
func (m *Machine) free() bool {
	if m.maxSeen > 0 && (!m.exists || m.rec.Token < m.maxSeen) {
		return false
	}
	return !m.exists || m.rec.Released && !m.cfg.TakeoverOnly || m.cfg.Preempt != nil && m.rec.Holder != m.cfg.ID && m.cfg.Preempt(m.rec)
}

// follow schedules a follower's next step: take the lease when the protocol
// allows it, else poll. While a term's callbacks run it only polls.
func (m *Machine) follow(now time.Time) {
	if m.phase != running || m.state == leading {
		return
	}
	if m.resigning && !m.held {
		// Resign's give-back is still owed: a renewal in flight when the
		// term ended may have landed since, and the record be ours.
		m.schedule(now, doResign)
		return
	}
	poll := m.pollAfter(now)
	if m.held || m.gated || now.Before(m.time(m.holdUntil)) {
		if hold := m.time(m.holdUntil); !m.held && !m.gated && m.free() && hold.Before(poll) {
			// Free when the hold-off ends: take it then (reading first, as
			// what we know will be old), not a poll later, which may be a
			// cold one.
			m.schedule(hold, doAcquire)
			return
		}
		m.schedule(poll, doPoll)
		return
	}
	if m.free() {
		m.schedule(now, doAcquire)
		return
	}
	ttl := max(m.rec.Duration, m.termTTL)
	if !m.exists || m.rec.Token < m.maxSeen {
		ttl = max(ttl, m.maxTTL) // a lost record: wait out the longest lease seen
	}
	at := m.time(m.since).Add(WaitBeforeTakeover(ttl, m.cfg.MaxDrift))
	switch {
	case poll.Before(at):
		m.schedule(poll, doPoll)
	case m.cold && m.since == m.read:
		// A cold follower checks a record that just changed (its holder
		// is alive, as far as anyone knows) at its next cold poll, not at
		// its takeover instant: a read then would be one more per wait.
		m.schedule(poll, doPoll)
	default:
		m.schedule(at, doAcquire)
	}
}

// releaseNext picks the next step of Release once nothing is in flight.
func (m *Machine) releaseNext(now time.Time) {
	switch {
	case len(m.pending) > 0:
		// A write of ours may have landed: read before deciding.
		m.unresolved = &flight{do: doCheck, op: Op{Expect: m.ver}}
		if !m.exists {
			m.unresolved.op.Expect = lease.NoVersion
		}
		m.schedule(now, doReadBack)
	case m.ownVer != lease.NoVersion && m.exists && m.ver == m.ownVer && !m.rec.Released:
		m.schedule(now, doRelease)
	default:
		m.finish()
	}
}

// ownRecord returns our last confirmed write's record, to write again.
func (m *Machine) ownRecord() lease.Record {
	return lease.Record{Holder: m.cfg.ID, Token: m.ownTok, Duration: m.cfg.LeaseDuration, Payload: m.cfg.Payload}
}

func (m *Machine) finish() {
	m.phase, m.nextDo, m.unresolved = done, 0, nil
}
