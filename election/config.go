package election

import (
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

// Config holds the resolved settings of a Machine. It has no defaults: fill
// them in with Timing.WithDefaults. Field names match tenure.Config, so that
// errors read the same in both places.
type Config struct {
	ID string // holder identity written into records
	Timing
	Payload []byte     // written into the record, e.g. the leader's address
	Rand    *rand.Rand // jitter and nonces; seed it for a deterministic Machine
	// StaleReads lets a follower's routine polls be served stale
	// (Op.Stale), where the store reads more cheaply so. A stale answer
	// can only delay a takeover or fail a compare-and-swap; one that would
	// have the follower act (the lease free, or gone back) is read again
	// strongly before anything is decided. Every other read (the first,
	// read-backs, the read before a takeover, reads after a wake-up) is
	// strong.
	StaleReads bool
	// ClockTokens makes every takeover, not only the creation of a record,
	// mint at least the wall time in Unix milliseconds. It is for stores
	// that may lose writes they acknowledged (lease.Lossy: Redis, NATS): a
	// takeover whose write was lost leaves no trace of its token, and a
	// candidate that never saw it would mint it again, one above the record
	// that came back; the wall time puts the next token above it, given
	// clocks closer than the time between the lost write and that takeover
	// (a failover's detection at least).
	ClockTokens bool
	// Wall reads the wall clock. The Machine reads it for one thing only: the
	// token of a record it creates (or takes over after the record went back,
	// or any it takes with ClockTokens) is at least the wall time in Unix
	// milliseconds. Nil: the wall reading of
	// the time given with the input, which is right for time.Now.
	Wall func() time.Time
	// Preempt, if set, lets a follower take a record held by another at
	// once, as if it had been released, when Preempt returns true for the
	// record it read. It is for records whose holder's belief protects
	// nothing: a candidate's standby record, which a follower of higher
	// priority (tenure's Config.Priority) takes from one of lower. The
	// holder learns at its next renewal, which conflicts. Never set it for
	// a lease: its holder would act on a term another had taken.
	Preempt func(held lease.Record) bool
	// TakeoverOnly makes a released record wait like a held one: taken only
	// once it stayed unchanged for ttl·(1+ρ). Waiting longer is always
	// safe; it is for a follower that waits on a lease only in case its
	// holder dies (a group member watching the shards it would inherit),
	// which must leave a lease given back to the one it was given to.
	TakeoverOnly bool
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

// Validate checks each field and how they relate. Errors are *FieldError.
func (c *Config) Validate() error {
	if c.ID == "" {
		return fieldErr("ID", "is empty")
	}
	if len(c.ID) > lease.MaxHolderLen || !utf8.ValidString(c.ID) || !allPrint(c.ID) {
		return fieldErr("ID", "%q must be printable UTF-8 of at most %d bytes", c.ID, lease.MaxHolderLen)
	}
	if err := c.Timing.Validate(); err != nil {
		return err
	}
	if len(c.Payload) > lease.MaxPayloadLen {
		return fieldErr("Payload", "is %d bytes, limit %d", len(c.Payload), lease.MaxPayloadLen)
	}
	if c.Rand == nil {
		return fieldErr("Rand", "is nil")
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
