package election

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// Defaults of the timings that are not derived from LeaseDuration.
const (
	DefaultLeaseDuration = 10 * time.Second
	DefaultMaxDrift      = 1e-3
)

// Timing holds every duration of the protocol, in one place: their
// meaning, defaults and rules are defined here, once. tenure.Config,
// tenure.LockerConfig and tenure.WatchConfig repeat the fields they use,
// flat, and convert by name; the simulator and tenure plan use Timing
// directly. WithDefaults fills in the zero fields; Validate checks the
// result. The derived defaults keep their proportion to LeaseDuration, so
// that a shorter or longer lease behaves alike; the values in brackets are
// those of the default 10s lease.
type Timing struct {
	// LeaseDuration is the lease asked for in every write (ttl): how long
	// followers wait, stretched by MaxDrift, before taking over from a
	// holder gone silent. Default DefaultLeaseDuration (10s); within
	// [lease.MinDuration, lease.MaxDuration].
	LeaseDuration time.Duration
	// RenewInterval runs from the send of one confirmed renewal to the
	// send of the next. Default LeaseDuration/5 [2s].
	RenewInterval time.Duration
	// PollInterval is how often a follower (or a waiting lock) reads the
	// lease on average: each wait is drawn in [0.9, 1.1] × PollInterval.
	// The longest wait bounds failover after a graceful release. Default
	// LeaseDuration/5 [2s].
	PollInterval time.Duration
	// OpTimeout bounds one store call; one not answered by then has failed
	// with an unknown outcome. Default LeaseDuration/5 [2s].
	OpTimeout time.Duration
	// RetryMin and RetryMax bound the jittered exponential backoff between
	// failed calls. Defaults LeaseDuration/100 [100ms], LeaseDuration/10
	// [1s].
	RetryMin, RetryMax time.Duration
	// MaxDrift (ρ) bounds how far any participant's clock rate strays from
	// true time, as a fraction: 1e-3 is 1 ms per second, far beyond what
	// NTP-disciplined or even free-running quartz clocks show. Default
	// DefaultMaxDrift (1e-3); at most MaxMaxDrift (0.1).
	MaxDrift float64
	// Margin ends a term this much before the lease could expire for
	// others, leaving the holder time to stop acting. Default
	// LeaseDuration/10 [1s].
	Margin time.Duration
	// ReleaseTimeout bounds the release after a stop (a Candidate's Run
	// ending, a lock's Unlock). Default LeaseDuration/2 [5s].
	ReleaseTimeout time.Duration
	// ColdPollInterval, when not zero, turns on the standby: a follower
	// other than the standby (a cold one) reads the lease, and the
	// standby's record, this often on average; the standby reads the lease
	// every PollInterval. Zero: no standby, and every follower polls every
	// PollInterval. Default, with a standby (WithStandby): 10×PollInterval
	// [20s]; at least PollInterval.
	ColdPollInterval time.Duration
}

// StandbySuffix names a lease's standby record: NAME + StandbySuffix.
const StandbySuffix = "::standby"

// StandbyTiming returns the timing of the standby record's own election,
// which cold followers watch: its lease is three cold polls (at least
// LeaseDuration), renewed and polled once a cold poll, with a margin of a
// sixth of it; store calls are timed and retried as for the lease. Its
// settings follow from t's, which must have a ColdPollInterval.
func StandbyTiming(t Timing) Timing {
	c := t.ColdPollInterval
	ttl := min(max(3*c, t.LeaseDuration), lease.MaxDuration)
	return Timing{LeaseDuration: ttl, RenewInterval: c, PollInterval: c, OpTimeout: t.OpTimeout,
		RetryMin: t.RetryMin, RetryMax: t.RetryMax, MaxDrift: t.MaxDrift, Margin: ttl / 6, ReleaseTimeout: t.ReleaseTimeout}
}

// WithDefaults returns t with every zero field set to its default.
func (t Timing) WithDefaults() Timing {
	if t.LeaseDuration == 0 {
		t.LeaseDuration = DefaultLeaseDuration
	}
	d := t.LeaseDuration
	for _, f := range []struct {
		p   *time.Duration
		def time.Duration
	}{
		{&t.RenewInterval, d / 5}, {&t.PollInterval, d / 5}, {&t.OpTimeout, d / 5},
		{&t.RetryMin, d / 100}, {&t.RetryMax, d / 10}, {&t.Margin, d / 10}, {&t.ReleaseTimeout, d / 2},
	} {
		if *f.p == 0 {
			*f.p = f.def
		}
	}
	if t.MaxDrift == 0 {
		t.MaxDrift = DefaultMaxDrift
	}
	return t
}

// WithStandby returns t with its defaults (WithDefaults) and a standby's:
// ColdPollInterval, if zero, 10×PollInterval.
func (t Timing) WithStandby() Timing {
	t = t.WithDefaults()
	if t.ColdPollInterval == 0 {
		t.ColdPollInterval = 10 * t.PollInterval
	}
	return t
}

// Validate checks each field and how they relate, LeaseDuration first (so
// that an error names the field set, not one derived from it). Zero fields
// are taken as given: call WithDefaults first. Errors are *FieldError, and
// every duration is bounded by MaxSetting, so no sum the protocol forms can
// overflow.
func (t Timing) Validate() error {
	if t.LeaseDuration < lease.MinDuration || t.LeaseDuration > lease.MaxDuration {
		return fieldErr("LeaseDuration", "%v must lie within [%v, %v]", t.LeaseDuration, lease.MinDuration, lease.MaxDuration)
	}
	if !(t.MaxDrift >= 0 && t.MaxDrift <= MaxMaxDrift) { // also rejects NaN
		return fieldErr("MaxDrift", "%v must lie within [0, %v]", t.MaxDrift, MaxMaxDrift)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
		min  time.Duration
	}{
		{"RenewInterval", t.RenewInterval, 1}, {"PollInterval", t.PollInterval, 1}, {"OpTimeout", t.OpTimeout, 1},
		{"RetryMin", t.RetryMin, 1}, {"RetryMax", t.RetryMax, 1}, {"Margin", t.Margin, 0}, {"ReleaseTimeout", t.ReleaseTimeout, 0},
	} {
		if err := CheckDuration(f.name, f.d, f.min); err != nil {
			return err
		}
	}
	if t.RetryMax < t.RetryMin {
		return fieldErr("RetryMax", "%v is below RetryMin %v", t.RetryMax, t.RetryMin)
	}
	window := LeadWindow(t.LeaseDuration, t.MaxDrift, t.Margin)
	if window <= 0 {
		return fieldErr("Margin", "%v leaves no lead window: LeaseDuration×(1-MaxDrift) is %v",
			t.Margin, t.LeaseDuration-Drift(t.LeaseDuration, t.MaxDrift))
	}
	// A renewal sent at RenewInterval may time out (OpTimeout), be read back
	// (OpTimeout) and back off (RetryMax); one more attempt must still be
	// possible before the deadline, or a single slow request demotes.
	if need := t.RenewInterval + 2*t.OpTimeout + t.RetryMax; need > window {
		return fieldErr("RenewInterval", "%v + 2×OpTimeout %v + RetryMax %v = %v leaves no room to retry a renewal within the lead window %v (LeaseDuration×(1-MaxDrift)-Margin); shorten them or lengthen LeaseDuration",
			t.RenewInterval, t.OpTimeout, t.RetryMax, need, window)
	}
	if t.ColdPollInterval != 0 {
		if err := CheckDuration("ColdPollInterval", t.ColdPollInterval, 1); err != nil {
			return err
		}
		if t.ColdPollInterval < t.PollInterval {
			return fieldErr("ColdPollInterval", "%v is below PollInterval %v", t.ColdPollInterval, t.PollInterval)
		}
		if err := StandbyTiming(t).Validate(); err != nil {
			// The standby's renewal, once a cold poll, must fit retries
			// within its lease of three.
			return fieldErr("ColdPollInterval", "%v is too short for the standby's own lease (%v); lengthen it", t.ColdPollInterval, err)
		}
	}
	return nil
}

// MaxSetting is the longest duration any timing setting may take. Every sum
// the protocol forms from a few settings then stays far from overflowing.
const MaxSetting = lease.MaxDuration

// CheckDuration reports, as a *FieldError naming field, a duration below min
// (0: it must not be negative; 1: it must be positive) or above MaxSetting.
func CheckDuration(field string, d, min time.Duration) error {
	switch {
	case d < min && min > 0:
		return fieldErr(field, "%v must be positive", d)
	case d < min:
		return fieldErr(field, "%v must not be negative", d)
	case d > MaxSetting:
		return fieldErr(field, "%v exceeds the limit of %v", d, MaxSetting)
	}
	return nil
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
