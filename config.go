package tenure

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel/metric"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease"
)

// Defaults that are not derived from LeaseDuration (see election.Timing,
// which holds every timing default).
const (
	DefaultLeaseDuration = election.DefaultLeaseDuration
	DefaultMaxDrift      = election.DefaultMaxDrift
)

// Config configures a Candidate. Lease and Store are required; every other
// field has a default, which New fills in on its own copy. The timing fields
// are those of election.Timing, which defines their meaning, defaults and
// rules; they stand here flat so that a Config literal can set them. Values
// in brackets are those of the default lease.
type Config struct {
	// Lease names the lease to campaign for (see lease.ValidateName).
	Lease string
	// Store keeps the lease: lease/memlease in one process, lease/filelease
	// for the processes of one host, or across machines lease/dynamolease,
	// lease/s3lease, lease/pglease, lease/etcdlease, lease/gcslease or
	// lease/azbloblease.
	Store lease.Store
	// Callbacks tell the program about its terms. All are optional.
	Callbacks Callbacks

	// ID identifies this candidate in the lease record. It must differ
	// between processes. Default: hostname-pid-random.
	ID string
	// Payload is stored with the lease while this candidate holds it, for
	// others to read (e.g. its address). At most lease.MaxPayloadLen bytes.
	Payload []byte

	// LeaseDuration is the lease asked for. Default: 10s.
	LeaseDuration time.Duration
	// RenewInterval: from one confirmed renewal to the next. Default:
	// LeaseDuration/5 [2s].
	RenewInterval time.Duration
	// PollInterval: a follower's mean wait between reads. Default:
	// LeaseDuration/5 [2s].
	PollInterval time.Duration
	// OpTimeout bounds one store call. Default: LeaseDuration/5 [2s].
	OpTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between failed calls.
	// Defaults: LeaseDuration/100 [100ms] and LeaseDuration/10 [1s].
	RetryMin, RetryMax time.Duration
	// MaxDrift (ρ) bounds any clock's rate error. Default: 1e-3.
	MaxDrift float64
	// Margin ends a term this much before the lease could expire for
	// others. Default: LeaseDuration/10 [1s].
	Margin time.Duration
	// ReleaseTimeout bounds the release when Run's context is done.
	// Default: LeaseDuration/2 [5s].
	ReleaseTimeout time.Duration
	// ResignHoldOff is how long a candidate stays a follower after Resign.
	// Default: 2×PollInterval [4s], so that another candidate's poll finds
	// the lease free first.
	ResignHoldOff time.Duration

	// StrongPolls makes followers poll with strongly consistent reads even
	// where the store offers cheaper ones (lease.StaleGetter: DynamoDB's
	// eventually consistent GetItem, half the read units). By default they
	// poll with those: a stale answer can only delay a takeover or fail a
	// compare-and-swap, and one that would have the follower act (the
	// lease free, or its record gone back) is read again strongly first.
	// The first read, read-backs, the read before a takeover and reads
	// after a wake-up are always strong.
	StrongPolls bool

	// Standby makes followers share the watching, so that the store's bill
	// stays nearly flat as candidates are added. One follower, the
	// standby, holds a second record (Lease + "::standby") and reads the
	// lease every PollInterval; the others read the lease, and that
	// record, every ColdPollInterval, and one of them takes the standby's
	// place once it goes. Which follower is the standby changes only how
	// often each reads, never who may take the lease or when; a failover
	// with no standby left is bounded by ColdPollInterval instead of
	// PollInterval. Off by default; every candidate of a lease should
	// agree. See docs/protocol.md, "Standby and wake-ups".
	Standby bool
	// ColdPollInterval: with Standby, a follower's mean wait between reads
	// unless it is the standby. Default: 10×PollInterval [20s].
	ColdPollInterval time.Duration
	// WakeAddr, with Standby, is a UDP address ("host:port"; port 0 picks
	// a free one) on which this candidate listens for wake-ups. The
	// standby publishes its address in its record, and a leader that gives
	// the lease back (Run's context done, Resign) sends it a wake-up: it
	// then reads the lease at once and takes it, in a few store round
	// trips instead of up to a poll. A wake-up only makes the standby read
	// sooner, at most WakeBurst (3) at once and then one a second; it
	// carries no authority, and a lost one leaves the poll to find the
	// lease free.
	//
	// A leader with WakeAddr also sends the standby a renewal notice after
	// each renewal the store confirms, and the standby reads the lease on
	// it (strongly) instead of on its own clock: it sees each renewal a
	// round trip or two after it was made, and a failover after a crash
	// takes about LeaseDuration less the time since the last renewal, not
	// up to a poll more. The leader learns the standby's address by reading
	// its record once a standby lease (3×ColdPollInterval). Notices, too,
	// carry no authority: rate-limited, they only move the standby's reads,
	// and its polls take over when they stop.
	//
	// Empty (the default): no listener, no wake-ups, no notices; but with
	// a Priority, a listener on a free port of the address this host sends
	// from by its default route (a pod's IP, a VM's private address;
	// loopback on a host without one, or with a store one host shares,
	// lease.OneHost), since a preferred candidate must be
	// woken to be the first to see a hand-over's release. Set WakeAddr where the other
	// candidates reach this one by another address, or NoWake for no
	// listener.
	WakeAddr string
	// WakeAdvertise is the address published for WakeAddr, when others
	// reach this host by another (NAT, containers). Default: WakeAddr's
	// host with the port bound, so WakeAddr must then name a host.
	WakeAdvertise string

	// Priority makes this candidate preferred to those of lower priority
	// (higher is preferred; default 0, and all equal: no candidate is).
	// The standby is then the follower of highest priority: one of higher
	// priority takes its place at its next cold poll. A leader that finds
	// the standby of higher priority than its own, alive (its record
	// rewritten since the leader last read it, once a cold poll), hands
	// the lease over once its term is PriorityHoldOff old: the term ends
	// (ReasonHandedOver), the lease is given back and the standby woken
	// (a Priority listens for wake-ups by default: see WakeAddr; a standby
	// not woken finds the lease free at its next poll, and a cold follower
	// may find it first). If nobody has taken it by ResignHoldOff later,
	// the leader takes it back.
	// Equal priorities never hand over. Priority decides who gives the
	// lease up and who is woken, never who may take it or when: every
	// takeover keeps the lease rules.
	//
	// A non-zero Priority turns Standby on. Every leader looks for a
	// preferred standby, with the defaults too: without Standby it reads
	// the standby record once 10×PollInterval [20s] (180 reads an hour, 5%
	// more requests for a lease of two candidates), so setting Priority
	// on the candidates to prefer is enough. See docs/protocol.md,
	// "Preferred leaders".
	Priority int
	// PriorityHoldOff: a leader hands the lease over to a candidate of
	// higher priority only once its term is this old, so that a preferred
	// candidate that keeps crashing and coming back moves the lease at
	// most once a hold-off. Default: the standby record's lease,
	// 3×ColdPollInterval (without Standby, 30×PollInterval) [1m].
	PriorityHoldOff time.Duration

	// Clock supplies time. Default: clock.New() from
	// github.com/benbjohnson/clock, the system clock.
	Clock Clock
	// Logger receives elections, demotions and store errors. Default: none.
	Logger *slog.Logger
	// MeterProvider receives the metrics listed in metrics.go (tenure.leader,
	// tenure.store.calls, ...). Default: otel.GetMeterProvider(), the
	// global one, which records nothing until a program installs an SDK.
	MeterProvider metric.MeterProvider
	// Rand supplies jitter and write nonces. Default: seeded from
	// crypto/rand. Seed it only for deterministic tests and simulation, and
	// never give two candidates the same seed.
	Rand *rand.Rand
}

// Validate checks every field, with the defaults filled in where a field is
// zero, and how the fields relate, e.g. that a renewal can be retried
// before the deadline. It changes nothing: New fills in the defaults on its
// own copy. It returns the first problem found; errors.As finds the
// *election.FieldError that names the field.
func (c Config) Validate() error {
	_, err := c.resolved()
	return err
}

// resolved returns c with its defaults filled in, checked.
func (c Config) resolved() (Config, error) {
	if err := ValidateName(c.Lease); err != nil {
		return c, fieldError(&election.FieldError{Field: "Lease", Err: err})
	}
	if c.Store == nil {
		return c, fieldError(&election.FieldError{Field: "Store", Reason: "is nil"})
	}
	c = c.WithDefaults()
	ec := c.machineConfig()
	if err := ec.Validate(); err != nil {
		return c, fieldError(err)
	}
	if err := election.CheckDuration("ResignHoldOff", c.ResignHoldOff, 0); err != nil {
		return c, fieldError(err)
	}
	if err := c.checkStandby(); err != nil {
		return c, fieldError(err)
	}
	return c, nil
}

// checkStandby checks the standby's fields (their timing is checked with
// the rest).
func (c *Config) checkStandby() error {
	bad := func(field, format string, args ...any) error {
		return &election.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if err := election.CheckDuration("PriorityHoldOff", c.PriorityHoldOff, 0); err != nil {
		return err
	}
	if !c.Standby {
		switch {
		case c.ColdPollInterval != 0:
			return bad("ColdPollInterval", "is set but Standby is off")
		case c.WakeAddr != "" && c.WakeAddr != NoWake || c.WakeAdvertise != "":
			return bad("WakeAddr", "is set but Standby is off: only a standby publishes one")
		}
		return nil
	}
	if err := lease.ValidateName(c.Lease + election.StandbySuffix); err != nil {
		return &election.FieldError{Field: "Lease", Reason: "leaves no room for the standby record's name", Err: err}
	}
	return checkWake(c.WakeAddr, c.WakeAdvertise, "WakeAddr", "WakeAdvertise")
}

// WithDefaults returns a copy of c with every zero field that has a default
// set to it: the timings (election.Timing.WithDefaults), ID, Clock and Rand.
// It checks nothing.
func (c Config) WithDefaults() Config {
	if c.Priority != 0 {
		c.Standby = true // priorities work through the standby
	}
	t := timingOf(&c)
	if c.Standby {
		t = t.WithStandby()
	} else {
		t = t.WithDefaults()
	}
	setTiming(&c, t)
	if c.ResignHoldOff == 0 {
		c.ResignHoldOff = 2 * c.PollInterval
	}
	if c.PriorityHoldOff == 0 {
		c.PriorityHoldOff = election.StandbyTiming(t.WithStandby()).LeaseDuration
	}
	withDefaults(&c.ID, &c.Clock, &c.Rand)
	return c
}

// withDefaults fills in the identity, clock and randomness that Config
// and LockerConfig share, where they are left zero.
func withDefaults(id *string, clk *Clock, rnd **rand.Rand) {
	if *id == "" {
		*id = defaultID()
	}
	if *clk == nil {
		*clk = clock.New()
	}
	if *rnd == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:]) // never fails on supported platforms
		*rnd = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
}

func fieldError(err error) error { return fmt.Errorf("tenure: config: %w", err) }

func (c *Config) machineConfig() election.Config {
	return election.Config{ID: c.ID, Timing: timingOf(c), Payload: c.Payload, Rand: c.Rand, Wall: wallOf(c.Clock), StaleReads: c.staleReads()}
}

// staleReads reports whether followers poll with the store's stale reads.
func (c *Config) staleReads() bool {
	_, ok := c.Store.(lease.StaleGetter)
	return ok && !c.StrongPolls
}

// standbyConfig is the configuration of the standby record's Machine, on
// its own timing; standby.New adds the payload.
// Without Standby, a leader still reads the record (standby.NewWatch)
// at the cadence a standby's would have: ColdPollInterval's default.
func (c *Config) standbyConfig() election.Config {
	return election.Config{ID: c.ID, Timing: election.StandbyTiming(timingOf(c).WithStandby()), Rand: c.Rand, Wall: wallOf(c.Clock), StaleReads: c.staleReads()}
}

// wallOf returns the wall clock of clk: its Wall method if it has one (a
// simulator's clock keeps wall and monotonic time apart), else nil, and the
// Machine reads the wall part of Now.
func wallOf(clk Clock) func() time.Time {
	if w, ok := clk.(interface{ Wall() time.Time }); ok {
		return w.Wall
	}
	return nil
}

// ValidateName reports whether name may name a lease or a lock: the rules
// of lease.ValidateName, and no "::", which names the records tenure keeps
// beside a lease (its standby, a lock's queue). A Candidate leading
// "jobs::queue" would otherwise jam the fair lock "jobs".
func ValidateName(name string) error {
	if err := lease.ValidateName(name); err != nil {
		return err
	}
	if strings.Contains(name, "::") {
		return fmt.Errorf("%w: %q: \"::\" is kept for tenure's own records (a lock's queue, a lease's standby)", lease.ErrInvalidName, name)
	}
	return nil
}

// defaultID is unique per process: the host, the pid, and a random part for
// pid reuse and containers that all run as pid 1.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = crand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
