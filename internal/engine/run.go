package engine

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/driver"
	"github.com/tenure-go/tenure/internal/host"
	"github.com/tenure-go/tenure/internal/standby"
	"github.com/tenure-go/tenure/lease"
)

// Run is one Candidate's run on a host.Core: the lease's entry (its driver
// and the release timer) and the standby's (the standby campaign, or a
// leader's watch of the standby record), the Resign calls and hand-overs
// waiting for the lease to go back, and the wake-up of the standby once it
// has. Every method belongs to the host's loop.
type Run struct {
	core *host.Core
	fx   RunEffects
	cfg  RunConfig
	d    *driver.Driver
	le   leaseEntry
	sb   *sbEntry // nil: no standby record to read (a name without room for it)
	err  error    // ends the run: the store refused at the start

	resigns []func()      // Resign calls waiting for the lease to be given back
	handing bool          // a hand-over has yet to give the lease back
	waking  bool          // a wake-up of the standby waits for the lease to go back
	leading bool          // a term is on
	dur     time.Duration // the Machine's LeaseDuration: what its records carry
	renewal Renewal       // what the latest renewal notice told, or would
}

// Renewal is what a renewal notice tells the standby: the version the
// leader's last confirmed write made and its term (holder, token, lease
// duration), so that a standby that read that term times the lease from
// the notice without reading (election.Machine.NoticeRecord). Version is
// NoVersion where the Machine cannot tell: the notice then only asks for
// a read.
type Renewal struct {
	Version  lease.Version
	Holder   string
	Token    uint64
	Duration time.Duration
}

// RunConfig is what a Run needs beyond its effects.
type RunConfig struct {
	Lease, ID      string
	ReleaseTimeout time.Duration
	ResignHoldOff  time.Duration // a hand-over's hold-off
	// Standby runs the standby campaign (tenure's Config.Standby); without
	// it a leader still reads the standby record, to hand over to a
	// preferred standby. StandbyConfig configures the record's Machine,
	// nil for no record (a name without room for it).
	Standby       bool
	StandbyConfig *election.Config
	// Addr is the wake-up address the standby publishes; "" for none.
	Addr       string
	Preference standby.Preference
}

// RunEffects is what a Run tells the process around it, and asks of it:
// the driver's effects that are the process's (callbacks, status,
// barriers), and the standby's wake-ups and notices. Every method runs on
// the host's loop, within an event.
type RunEffects interface {
	Now() time.Time
	Log(level slog.Level, msg string, args ...any)
	Elected(t election.Term)
	Demoted(t election.Term, r election.Reason)
	LeaderChanged(l election.Leader)
	Anomaly(err error)
	// Publish reports what the Machine knows after a step; standby says
	// whether this candidate is the standby.
	Publish(s driver.Snapshot, standby bool)
	// Barrier queues b behind the callbacks queued so far: Reached once
	// they have all returned.
	Barrier(b driver.Barrier)
	// Hot says that this candidate became the standby (true) or is no
	// more.
	Hot(hot bool)
	// Notice sends a renewal notice to the standby's address.
	Notice(addr string, r Renewal)
	// HandOver says that the lease is about to be handed over to the
	// standby holder, of a higher priority.
	HandOver(holder string, priority int)
	// PlanWake finds the standby to wake (tenure reads its record): the
	// lease this candidate leads is about to be given back. WakeNow says
	// it has been, confirmed: wake the standby found; a run that ends
	// without it says neither.
	PlanWake()
	WakeNow()
}

// NewRun returns the run of Machine m, on core, telling fx.
func NewRun(core *host.Core, fx RunEffects, m driver.Machine, cfg RunConfig) *Run {
	r := &Run{core: core, fx: fx, cfg: cfg}
	if c, ok := m.(interface{ Config() *election.Config }); ok {
		r.dur = c.Config().LeaseDuration
	}
	r.le.r = r
	r.d = driver.New(m, (*runFx)(r), cfg.ReleaseTimeout)
	if cfg.StandbyConfig != nil {
		sb := &sbEntry{r: r, watch: !cfg.Standby, cold: true}
		if cfg.Standby {
			sb.s = standby.New(sb, cfg.Lease, *cfg.StandbyConfig, cfg.Addr, cfg.Preference)
		} else {
			// No campaign, no listener, no notices: the lease's Machine
			// keeps its hot polls; cold here says only that it is no
			// standby.
			sb.s = standby.NewWatch(sb, cfg.Lease, *cfg.StandbyConfig, cfg.Preference)
		}
		r.sb = sb
	}
	return r
}

// Driver returns the lease's driver.
func (r *Run) Driver() *driver.Driver { return r.d }

// Err returns the error that ended the run early (the store refused at
// the start), or nil.
func (r *Run) Err() error { return r.err }

// Standby reports whether this candidate is the standby now.
func (r *Run) Standby() bool { return r.sb != nil && !r.sb.watch && !r.sb.cold }

// Start begins the campaign. The standby campaign begins once another
// candidate is seen to lead (LeaderChanged): a candidate about to take a
// free lease would take the standby record too, then give it back.
func (r *Run) Start() {
	if r.sb != nil && !r.sb.watch {
		r.d.SetCold(true)
	}
	r.d.Start()
}

// After runs after each event of the host: it settles what the event
// changed, arms the entries, and reports whether the run is over.
func (r *Run) After() bool {
	if (len(r.resigns) > 0 || r.handing) && !r.d.Resigning() {
		for _, done := range r.resigns {
			done()
		}
		r.resigns, r.handing = nil, false
		r.wakeNow()
	}
	if r.sb != nil {
		r.sb.apply()
		r.core.Fix(r.sb)
	}
	r.core.Fix(&r.le)
	if r.d.Done() && !r.d.GaveUp() {
		// Given back: wake the standby now, before the run's end, which
		// the wake-up takes for a release never confirmed.
		r.wakeNow()
	}
	return r.err != nil || r.d.Done() && (r.sb == nil || r.sb.s.Done())
}

// Finish settles the run once the host's loop has returned: a lease given
// back wakes the standby.
func (r *Run) Finish() {
	if !r.d.GaveUp() {
		r.wakeNow()
	}
}

// Resign ends the term, if any, and gives the lease back, staying a
// follower for holdOff; done runs once it is given back (or was not held).
func (r *Run) Resign(holdOff time.Duration, done func()) {
	r.resigns = append(r.resigns, done)
	r.wakeAfterRelease()
	r.d.Resign(holdOff)
}

// Stop ends the run: the term, then the release; and the standby campaign.
func (r *Run) Stop() {
	r.wakeAfterRelease()
	r.d.Stop()
	if r.sb != nil {
		r.sb.s.Follow(false)
		r.sb.s.Lead(false)
	}
}

// Woken takes a wake-up: read the lease now, within the rate limit. It
// reports whether the lease is read.
func (r *Run) Woken() bool {
	if r.sb == nil || r.sb.watch || !r.sb.s.AllowWake(r.fx.Now()) {
		return false
	}
	r.d.Hint()
	return true
}

// Noticed takes a renewal notice of version v (NoVersion: unknown): the
// Machine rate-limits it, and skips one of the version it last read.
func (r *Run) Noticed(v lease.Version) { r.d.Notice(v) }

// NoticedRecord takes a renewal the store's change feed told of with its
// record: the Machine times it, if it renews the term last read, and
// takes it as a notice otherwise.
func (r *Run) NoticedRecord(v lease.Version, rec lease.Record) { r.d.NoticeRecord(v, rec) }

// wakeAfterRelease plans a wake-up for the standby once the lease this
// candidate leads is given back: with Standby, at every release; without,
// at a hand-over only.
func (r *Run) wakeAfterRelease() {
	if r.sb != nil && !r.sb.watch {
		r.planWake()
	}
}

func (r *Run) planWake() {
	if r.leading && !r.waking {
		r.waking = true
		r.fx.PlanWake()
	}
}

// wakeNow sends the planned wake-up: the lease was given back.
func (r *Run) wakeNow() {
	if r.waking {
		r.waking = false
		r.fx.WakeNow()
	}
}

// leaseEntry is the host's entry for the lease: its driver, and the
// release timer.
type leaseEntry struct {
	host.Slot
	r      *Run
	flight *host.Flight // the call in flight
	giveUp time.Time    // the release timer; zero if none
}

func (e *leaseEntry) Due() time.Time {
	if e.r.d.Done() {
		return time.Time{}
	}
	d := e.r.d.Wake()
	if !e.giveUp.IsZero() && (d.IsZero() || e.giveUp.Before(d)) {
		d = e.giveUp
	}
	return d
}

func (e *leaseEntry) Fire(now time.Time) {
	switch d := e.r.d; {
	case !e.giveUp.IsZero() && !now.Before(e.giveUp):
		e.giveUp = time.Time{}
		d.GiveUp()
	case !d.Wake().IsZero() && !now.Before(d.Wake()):
		d.Tick()
	}
}

func (e *leaseEntry) CallDone(f *host.Flight, res election.Result) {
	if f == e.flight {
		e.flight = nil
	}
	if err := e.r.d.Result(res); err != nil {
		e.r.err = fmt.Errorf("tenure: lease %q: %w", e.r.cfg.Lease, err)
		if strings.Contains(err.Error(), strconv.Quote(e.r.cfg.Lease)) {
			e.r.err = fmt.Errorf("tenure: %w", err) // the store's error names the lease already
		}
	}
}

// runFx is a Run's driver.Effects.
type runFx Run

func (f *runFx) r() *Run { return (*Run)(f) }

func (f *runFx) Now() time.Time { return f.fx.Now() }

func (f *runFx) Cancel(uint64) { f.core.Cancel(f.le.flight) }

// Wake: the host reads the wake-up off the driver (leaseEntry.Due).
func (f *runFx) Wake(time.Time) {}

func (f *runFx) ReleaseTimer(d time.Duration) { f.le.giveUp = f.fx.Now().Add(d) }

func (f *runFx) Barrier(b driver.Barrier) { f.fx.Barrier(b) }

// Send makes the store call; the Machine times it out.
func (f *runFx) Send(op election.Op) {
	f.le.flight = f.core.Call(&f.le, 0, f.cfg.Lease, op, 0)
}

func (f *runFx) Elected(t election.Term) {
	f.leading = true
	if sb := f.sb; sb != nil {
		sb.s.Follow(false) // a leader is no standby: give the record back
		sb.s.Lead(true)
	}
	f.fx.Elected(t)
}

func (f *runFx) Demoted(t election.Term, why election.Reason) {
	f.leading = false
	f.fx.Demoted(t, why)
	if sb := f.sb; sb != nil {
		sb.s.Lead(false)
		if !f.d.Stopping() {
			sb.s.Follow(true)
		}
	}
}

func (f *runFx) LeaderChanged(l election.Leader) {
	if sb := f.sb; sb != nil && l.Holder != "" && l.Holder != f.cfg.ID && !f.d.Stopping() {
		sb.s.Follow(true)
	}
	f.fx.LeaderChanged(l)
}

func (f *runFx) Anomaly(err error) { f.fx.Anomaly(err) }

func (f *runFx) Publish(snap driver.Snapshot) {
	r := f.r()
	f.fx.Publish(snap, r.Standby())
	if snap.Leading {
		f.renewal = Renewal{Version: snap.Version, Holder: f.cfg.ID, Token: uint64(snap.Term.Token), Duration: f.dur}
	}
	if sb := f.sb; sb != nil {
		if addr := sb.s.Renewed(snap.Leading, snap.Term.Deadline); addr != "" {
			f.fx.Notice(addr, f.renewal)
		}
		sb.unled(f.fx.Now(), snap.Leading, snap.Leader.Holder)
	}
}

// sbEntry is the host's entry for the standby record: the standby
// campaign (internal/standby), or a leader's watch of the record.
type sbEntry struct {
	host.Slot
	r      *Run
	s      *standby.Standby
	flight *host.Flight // the call in flight
	cold   bool         // what the lease's Machine was last told
	hot    bool         // what the campaign says now
	watch  bool         // no campaign: the leader's reads only (standby.NewWatch)
	// hotSince: when this candidate became the standby (zero: it is not);
	// toldUnled: a preferred standby said it has not been handed the
	// lease.
	hotSince  time.Time
	toldUnled bool
}

// apply tells the lease's Machine whether this candidate is the standby,
// outside the driver's step.
func (sb *sbEntry) apply() {
	if sb.watch {
		return
	}
	if cold := !sb.hot; cold != sb.cold {
		sb.cold = cold
		sb.r.d.SetCold(cold)
		sb.r.fx.Hot(sb.hot)
	}
}

// Due, Fire and CallDone make the campaign the host's entry.
func (sb *sbEntry) Due() time.Time     { return sb.s.Due() }
func (sb *sbEntry) Fire(now time.Time) { sb.s.Fire(now) }
func (sb *sbEntry) CallDone(f *host.Flight, res election.Result) {
	if f == sb.flight {
		sb.flight = nil
	}
	sb.s.Result(res)
	if addr := sb.s.Owed(); addr != "" {
		sb.r.fx.Notice(addr, sb.r.renewal)
	}
}

// The standby.Host of a Run.

func (sb *sbEntry) Now() time.Time { return sb.r.fx.Now() }

func (sb *sbEntry) Call(op election.Op) {
	sb.flight = sb.r.core.Call(sb, 0, sb.r.cfg.Lease+election.StandbySuffix, op, 0)
}

func (sb *sbEntry) Cancel() {
	sb.r.core.Cancel(sb.flight)
	sb.flight = nil
}

func (sb *sbEntry) Log(level slog.Level, msg string, args ...any) { sb.r.fx.Log(level, msg, args...) }

func (sb *sbEntry) Hot(hot bool) {
	sb.hot = hot
	sb.hotSince = time.Time{}
	if hot {
		sb.hotSince = sb.Now()
		sb.r.fx.Log(slog.LevelInfo, "standby: reading the lease every PollInterval")
	} else {
		sb.r.fx.Log(slog.LevelInfo, "standby no more: reading every ColdPollInterval")
	}
}

func (sb *sbEntry) Reschedule() {} // the run fixes its entries after every event

// unled says, once, why a preferred standby has not led for three
// hold-offs while another leads: a leader hands over only if it looks for
// a preferred standby, which it does with Standby or a Priority of its
// own. Called after every step of the lease.
func (sb *sbEntry) unled(now time.Time, leading bool, leader string) {
	p := sb.r.cfg.Preference
	if p.Priority <= 0 || leading || sb.hotSince.IsZero() || leader == "" || leader == sb.r.cfg.ID {
		return
	}
	if wait := 3 * p.HoldOff; !sb.toldUnled && now.Sub(sb.hotSince) >= wait {
		sb.toldUnled = true
		sb.r.fx.Log(slog.LevelWarn, "preferred, but not handed the lease: the leader has not handed over in three hold-offs; one of equal or higher priority never does, nor one that cannot read this candidate's standby record (see its store errors), nor an older tenure, which handed over only with Standby",
			"priority", p.Priority, "leader", leader, "standby for", now.Sub(sb.hotSince).Round(time.Second).String())
	}
}

// HandOver gives the lease back for the standby, whose priority is higher,
// and wakes it once the release is confirmed. Priority decides only this,
// and who is woken: never who may take the lease, or when.
func (sb *sbEntry) HandOver(holder string, priority int) {
	r := sb.r
	if r.d.Stopping() {
		return // the release under way wakes the standby
	}
	if t, ok := r.d.Machine().Term(); !ok || !r.fx.Now().Before(t.Deadline) {
		return // the term is over by its clock (a read answered after a pause): nothing to hand over
	}
	r.planWake()
	r.handing = true
	r.fx.HandOver(holder, priority)
	r.d.HandOver(r.cfg.ResignHoldOff)
}
