package tenure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/leaderaddr"
	"github.com/tenure-go/tenure/lease"
)

// WatchConfig configures Watch. Lease and Store are required.
type WatchConfig struct {
	// Lease names the lease to watch.
	Lease string
	// Store keeps the lease.
	Store lease.Store
	// Timing's PollInterval is how often the lease is read, OpTimeout
	// bounds one read, and MaxDrift (ρ) stretches a holder's lease before
	// Observation.Expired says it is silent, as a follower would wait
	// (defaults 2s, 2s and 1e-3, as a Candidate's). The other timings
	// are a holder's, and ignored.
	Timing
	// Runtime's Clock supplies time; a Watcher writes nothing, and uses
	// no other field of it.
	Runtime
}

// Observation is a lease as a Watcher saw it.
type Observation struct {
	Lease string
	// Found reports that a record exists.
	Found bool
	// Leader describes the holder: its Holder, Token, Payload and Addr;
	// Holder is empty when the record is absent or released (Token is then
	// the record's last). Addr is empty too once this version of the record
	// is a lease old on this host's clock: the term is no longer known to
	// be live.
	Leader
	Released bool
	// Duration is the lease the holder asked for; WrittenAt the writer's
	// wall-clock time of the last write, for humans.
	Duration  time.Duration
	WrittenAt time.Time
	// At is the local time of this observation; Since the local time this
	// version of the record was first seen: At - Since is the record's age as
	// this host observed it.
	At, Since time.Time
	// Expired reports that the record has been unchanged for longer than
	// Duration×(1+MaxDrift) on this host's clock: its holder has gone
	// silent, as far as this host can tell, and a follower may take over.
	Expired bool
	// Err is the error of the last read, if it failed; the other fields
	// then tell what was seen before.
	Err error
}

// Validate checks every field, with the defaults filled in where a field
// is zero, as Watch does, and changes nothing.
func (c WatchConfig) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults filled in, checked.
func (c WatchConfig) resolved() (WatchConfig, error) {
	if err := lease.ValidateName(c.Lease); err != nil {
		return c, fieldError(&election.FieldError{Field: "Lease", Err: err})
	}
	if c.Store == nil {
		return c, fieldError(&election.FieldError{Field: "Store", Reason: "is nil"})
	}
	c.Timing = c.Timing.WithDefaults()
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"PollInterval", c.PollInterval}, {"OpTimeout", c.OpTimeout}} {
		if err := election.CheckDuration(f.name, f.d, 1); err != nil {
			return c, fieldError(err)
		}
	}
	if !(c.MaxDrift >= 0 && c.MaxDrift <= election.MaxMaxDrift) {
		return c, fieldError(&election.FieldError{Field: "MaxDrift", Reason: fmt.Sprintf("%v must lie within [0, %v]", c.MaxDrift, election.MaxMaxDrift)})
	}
	return c, nil
}

// Watch reads the lease every PollInterval, never writing, and calls fn
// with what it saw first and again whenever that changes: another holder
// or token, a release, the record vanishing, the holder going silent
// (Expired), a read failing or recovering. A renewal alone is not a change.
// fn runs on Watch's goroutine. Watch returns when ctx is done, or at once
// if the first read fails with an error that retrying cannot cure
// (lease.ErrPermanent).
func Watch(ctx context.Context, cfg WatchConfig, fn func(Observation)) error {
	cfg, err := cfg.resolved()
	if err != nil {
		return err
	}
	var (
		last    Observation
		ver     lease.Version
		seen    bool
		errText string
		addr    string // the holder's (Config.Addr), from the record
	)
	for {
		rctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		rec, v, err := cfg.Store.Get(rctx, cfg.Lease)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		now := cfg.Clock.Now()
		o := last
		o.Lease, o.Err, o.At = cfg.Lease, nil, now
		switch {
		case err == nil || errors.Is(err, lease.ErrNotFound):
			found := err == nil
			if !seen || found != o.Found || v != ver {
				o = Observation{Lease: cfg.Lease, Found: found, At: now, Since: now}
				addr = ""
				if found {
					o.Token, o.Released, o.Duration, o.WrittenAt = fencing.Token(rec.Token), rec.Released, rec.Duration, rec.WrittenAt
					if !rec.Released {
						o.Holder = rec.Holder
						addr, o.Payload = leaderaddr.Split(rec.Payload)
					}
				}
				ver = v
			}
			o.Expired = o.Found && !o.Released && now.Sub(o.Since) >= election.WaitBeforeTakeover(o.Duration, cfg.MaxDrift)
			// The address only while the term is known to be live: the
			// holder wrote this version no later than it was first seen.
			o.Addr = ""
			if now.Sub(o.Since) < o.Duration {
				o.Addr = addr
			}
		case !seen && errors.Is(err, lease.ErrPermanent):
			return fmt.Errorf("tenure: watch lease %q: %w", cfg.Lease, err)
		default:
			o.Err = err
		}
		e := ""
		if o.Err != nil {
			e = o.Err.Error()
		}
		if !seen || e != errText || differs(o, last) {
			fn(o)
		}
		seen, last, errText = true, o, e
		select {
		case <-ctx.Done():
			return nil
		case <-cfg.Clock.After(cfg.PollInterval):
		}
	}
}

// differs reports a change worth telling: not a renewal alone.
func differs(a, b Observation) bool {
	return a.Found != b.Found || a.Holder != b.Holder || a.Token != b.Token || a.Released != b.Released ||
		a.Expired != b.Expired || string(a.Payload) != string(b.Payload) || a.Addr != b.Addr
}
