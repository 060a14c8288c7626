package election

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tenure-go/tenure/lease"
)

// MaxMaxDrift is the largest clock drift bound a Config accepts. A clock that
// may be off its rate by more than 10% is broken, not drifting.
const MaxMaxDrift = 0.1

// Config holds the resolved settings of a Machine. It has no defaults: the
// tenure package fills them in and documents them. Field names match
// tenure.Config so that errors read the same in both places.
type Config struct {
	ID            string        // holder identity written into records
	LeaseDuration time.Duration // lease asked for in every write (ttl)
	RenewInterval time.Duration // time from a confirmed write's send to the next renewal
	PollInterval  time.Duration // follower read interval (an upper bound: jitter only shortens it)
	OpTimeout     time.Duration // a store call not answered by then is abandoned and counts as failed
	RetryMin      time.Duration // first backoff after a failed call
	RetryMax      time.Duration // backoff cap
	MaxDrift      float64       // ρ: bound on each clock's rate error, e.g. 1e-3
	Margin        time.Duration // subtracted from the lead window, for the leader to stop acting
	Payload       []byte        // written into the record, e.g. the leader's address
	Rand          *rand.Rand    // jitter and nonces; seed it for a deterministic Machine
	// Wall reads the wall clock. The Machine reads it for one thing only: the
	// token of a record it creates (or takes over after the record went back)
	// is at least the wall time in Unix milliseconds. Nil: the wall reading of
	// the time given with the input, which is right for time.Now.
	Wall func() time.Time
}

// FieldError is a Config field whose value breaks a rule, alone or together
// with other fields.
type FieldError struct {
	Field  string // as named in Config, e.g. "RenewInterval"
	Reason string
	Err    error // the cause, when another check found it
}

func (e *FieldError) Error() string {
	if e.Err != nil {
		return e.Field + ": " + e.Err.Error()
	}
	return e.Field + " " + e.Reason
}

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks each field and how they relate. Errors are *FieldError.
func (c *Config) Validate() error {
	if c.ID == "" {
		return fieldErr("ID", "is empty")
	}
	if len(c.ID) > lease.MaxHolderLen || !utf8.ValidString(c.ID) || !allPrint(c.ID) {
		return fieldErr("ID", "%q must be printable UTF-8 of at most %d bytes", c.ID, lease.MaxHolderLen)
	}
	if c.LeaseDuration < lease.MinDuration || c.LeaseDuration > lease.MaxDuration {
		return fieldErr("LeaseDuration", "%v must lie within [%v, %v]", c.LeaseDuration, lease.MinDuration, lease.MaxDuration)
	}
	if !(c.MaxDrift >= 0 && c.MaxDrift <= MaxMaxDrift) { // also rejects NaN
		return fieldErr("MaxDrift", "%v must lie within [0, %v]", c.MaxDrift, MaxMaxDrift)
	}
	for _, f := range []struct {
		name string
		d    time.Duration
		min  time.Duration
	}{
		{"RenewInterval", c.RenewInterval, 1}, {"PollInterval", c.PollInterval, 1}, {"OpTimeout", c.OpTimeout, 1},
		{"RetryMin", c.RetryMin, 1}, {"RetryMax", c.RetryMax, 1}, {"Margin", c.Margin, 0},
	} {
		if err := CheckDuration(f.name, f.d, f.min); err != nil {
			return err
		}
	}
	if c.RetryMax < c.RetryMin {
		return fieldErr("RetryMax", "%v is below RetryMin %v", c.RetryMax, c.RetryMin)
	}
	window := LeadWindow(c.LeaseDuration, c.MaxDrift, c.Margin)
	if window <= 0 {
		return fieldErr("Margin", "%v leaves no lead window: LeaseDuration×(1-MaxDrift) is %v",
			c.Margin, c.LeaseDuration-Drift(c.LeaseDuration, c.MaxDrift))
	}
	// A renewal sent at RenewInterval may time out (OpTimeout), be read back
	// (OpTimeout) and back off (RetryMax); one more attempt must still be
	// possible before the deadline, or a single slow request demotes.
	if need := c.RenewInterval + 2*c.OpTimeout + c.RetryMax; need > window {
		return fieldErr("RenewInterval", "%v + 2×OpTimeout %v + RetryMax %v = %v leaves no room to retry a renewal within the lead window %v (LeaseDuration×(1-MaxDrift)-Margin); shorten them or lengthen LeaseDuration",
			c.RenewInterval, c.OpTimeout, c.RetryMax, need, window)
	}
	if len(c.Payload) > lease.MaxPayloadLen {
		return fieldErr("Payload", "is %d bytes, limit %d", len(c.Payload), lease.MaxPayloadLen)
	}
	if c.Rand == nil {
		return fieldErr("Rand", "is nil")
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

// Drift returns ⌈d×rho⌉: how far a clock whose rate is off by at most rho may
// stray over d. It is exact for rho given to nine decimals, so the boundaries
// of the protocol fall on predictable nanoseconds.
func Drift(d time.Duration, rho float64) time.Duration {
	if d <= 0 || rho <= 0 {
		return 0
	}
	ppb := uint64(math.Round(rho * 1e9))
	hi, lo := bits.Mul64(uint64(d), ppb)
	q, r := bits.Div64(hi, lo, 1e9)
	if r != 0 {
		q++
	}
	return time.Duration(q)
}

// WaitBeforeTakeover returns ttl×(1+rho), rounded up: how long a follower
// must see a record unchanged on its own clock before it may take the lease.
func WaitBeforeTakeover(ttl time.Duration, rho float64) time.Duration {
	return ttl + Drift(ttl, rho)
}

// LeadWindow returns ttl×(1-rho)-margin, rounded down: how long after sending
// a write that succeeded a leader may act on its own clock.
func LeadWindow(ttl time.Duration, rho float64, margin time.Duration) time.Duration {
	return ttl - Drift(ttl, rho) - margin
}

func allPrint(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
