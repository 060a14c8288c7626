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
	"github.com/tenure-go/tenure/internal/leaderaddr"
	"github.com/tenure-go/tenure/internal/shell"
	"github.com/tenure-go/tenure/lease"
)

// Timing is the timing of a lease: how long a term lasts, how often it is
// renewed and polled, how store calls are timed and retried, how far
// clocks may drift. Config, LockerConfig, GroupConfig and WatchConfig embed
// it; election.Timing defines each field, its default (a zero field takes
// it) and its rules, once.
type Timing = election.Timing

// NoWake, as Runtime.WakeAddr, turns wake-ups off where they would be on by
// default (with a Priority).
const NoWake = shell.NoWake

// Runtime is what a Candidate, Locker, Group or Watcher takes from the
// process that runs it: its identity, its clock, where it logs, counts and
// draws randomness, and where it listens for wake-ups. Config,
// LockerConfig, GroupConfig and WatchConfig embed it; every field is
// optional. One Runtime may serve several of them, with WakeAddr's port
// 0 or empty (two listeners cannot share a port).
type Runtime struct {
	// ID identifies this process in the records it writes. It must
	// differ between processes. Default: hostname-pid-random.
	ID string

	// WakeAddr is a UDP address ("host:port"; port 0 picks a free one) on
	// which this process listens for wake-ups: datagrams that make it
	// read a record at once instead of at its next poll. A wake-up carries
	// no authority: it only makes a follower read sooner, WakeBurst (3) at
	// once and then one a second, and a lost one leaves the poll to find
	// the record free. NoWake: no listener. What it serves, and its
	// default:
	//
	//   - Config, with Standby: the standby publishes the address in its
	//     record, and a leader that gives the lease back (Run's context
	//     done, Resign, a hand-over) wakes it: it takes the lease in a few
	//     store round trips instead of up to a poll. The leader also sends
	//     the standby a renewal notice after each renewal the store
	//     confirms; the standby reads the lease on it (strongly), so that a
	//     failover after a crash takes about LeaseDuration less the time
	//     since the last renewal, not up to a poll more. The leader learns
	//     the standby's address by reading its record once a standby lease
	//     (3×ColdPollInterval). Default: none; with a Priority, a free port
	//     on the address this host sends from by its default route (a
	//     pod's IP, a VM's private address; loopback on a host without
	//     one, or with a store one host shares, lease.OneHost), since a
	//     preferred candidate must be woken to be the first to see a
	//     hand-over's release.
	//   - LockerConfig: a waiting Lock names itself, with the address, in
	//     the lock's wake record (NAME::wake): a plain waiter once per
	//     holder it waits behind (the first to write it stays), a fair one
	//     once it is the head of the queue. An Unlock (or Close) reads that
	//     record beside its release and wakes the waiter once the release
	//     is confirmed. Every process that takes the lock should set it.
	//     Default: none.
	//   - GroupConfig: a member that gives a shard up wakes its next owner
	//     at the address in that member's membership entry. Default: as a
	//     Priority's, a free port on the default route's address.
	WakeAddr string
	// WakeAdvertise is the address published for WakeAddr, when others
	// reach this host by another (NAT, containers). Default: WakeAddr's
	// host with the port bound, so WakeAddr must then name a host.
	WakeAdvertise string

	// Clock supplies time. Default: clock.New() from
	// github.com/benbjohnson/clock, the system clock.
	Clock Clock
	// Logger receives elections, demotions, lock and group events and
	// store errors (a kind of warning at most once per 10 s). Default:
	// none.
	Logger *slog.Logger
	// MeterProvider receives the metrics listed in docs/operations.md
	// (tenure.leader, tenure.store.calls, ...). Default:
	// otel.GetMeterProvider(), the global one, which records nothing
	// until a program installs an SDK.
	MeterProvider metric.MeterProvider
	// Rand supplies jitter and write nonces. Default: seeded from
	// crypto/rand. Seed it only for deterministic tests and simulation,
	// and never give two processes the same seed.
	Rand *rand.Rand
}

// Config configures a Candidate. Lease and Store are required; every other
// field has a default, which New fills in on its own copy. Values in
// brackets are those of the default lease (10s).
type Config struct {
	// Lease names the lease to campaign for (see lease.ValidateName).
	Lease string
	// Store keeps the lease: lease/memlease in one process, lease/filelease
	// for the processes of one host, or across machines lease/dynamolease,
	// lease/s3lease, lease/pglease, lease/etcdlease, lease/gcslease,
	// lease/azbloblease, lease/k8slease, lease/redislease or
	// lease/natslease (both may lose acknowledged writes on failover or
	// restart: docs/redis.md, docs/nats.md say what still holds).
	Store lease.Store
	// Callbacks tell the program about its terms. All are optional.
	Callbacks Callbacks
	// Payload is stored with the lease while this candidate holds it, for
	// others to read. At most lease.MaxPayloadLen bytes, Addr included;
	// it may not begin with byte 0xff.
	Payload []byte
	// Addr is the address (host:port) this process serves requests on,
	// published in the lease's record while it leads, beside Payload:
	// every candidate and Watch of the lease learns the leader's address
	// from the record it reads anyway (Status().Leader.Addr,
	// Observation.Addr), and none gives one while no term is known to be
	// live, so that nobody is routed to a leader that may be gone. Give
	// the host others reach this process on, not 0.0.0.0. Default: none.
	Addr string

	// Timing is the lease's: LeaseDuration, RenewInterval, PollInterval,
	// ... (a follower polls every PollInterval). ColdPollInterval is for
	// Standby only.
	Timing
	// Runtime is the process's: ID, Clock, Logger, wake-ups, ...
	Runtime

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
	// record, every ColdPollInterval (default 10×PollInterval [20s]), and
	// one of them takes the standby's place once it goes. Which follower
	// is the standby changes only how often each reads, never who may take
	// the lease or when; a failover with no standby left is bounded by
	// ColdPollInterval instead of PollInterval. With Runtime.WakeAddr, a
	// release wakes the standby and renewals notify it. Off by default;
	// every candidate of a lease should agree. See docs/protocol.md,
	// "Standby and wake-ups".
	Standby bool

	// Priority makes this candidate preferred to those of lower priority
	// (higher is preferred; default 0, and all equal: no candidate is).
	// The standby is then the follower of highest priority: one of higher
	// priority takes its place at its next cold poll. A leader that finds
	// the standby of higher priority than its own, alive (its record
	// rewritten since the leader last read it, once a cold poll), hands
	// the lease over once its term is PriorityHoldOff old: the term ends
	// (ReasonHandedOver), the lease is given back and the standby woken
	// (a Priority listens for wake-ups by default: see Runtime.WakeAddr; a
	// standby not woken finds the lease free at its next poll, and a cold
	// follower may find it first). If nobody has taken it by ResignHoldOff
	// later, the leader takes it back.
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
	if err := leaderaddr.Check(c.Addr, c.Payload); err != nil {
		return c, fieldError(&election.FieldError{Field: "Addr", Err: err})
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
	return shell.CheckWake(c.WakeAddr, c.WakeAdvertise, "WakeAddr", "WakeAdvertise")
}

// WithDefaults returns a copy of c with every zero field that has a default
// set to it: the timings (election.Timing.WithDefaults), ID, Clock and Rand.
// It checks nothing.
func (c Config) WithDefaults() Config {
	if c.Priority != 0 {
		c.Standby = true // priorities work through the standby
	}
	if c.Standby {
		c.Timing = c.Timing.WithStandby()
	} else {
		c.Timing = c.Timing.WithDefaults()
	}
	if c.ResignHoldOff == 0 {
		c.ResignHoldOff = 2 * c.PollInterval
	}
	if c.PriorityHoldOff == 0 {
		c.PriorityHoldOff = election.StandbyTiming(c.Timing.WithStandby()).LeaseDuration
	}
	c.Runtime = c.Runtime.withDefaults()
	return c
}

// withDefaults returns r with its identity, clock and randomness filled
// in where they are left zero.
func (r Runtime) withDefaults() Runtime {
	if r.ID == "" {
		r.ID = defaultID()
	}
	if r.Clock == nil {
		r.Clock = clock.New()
	}
	if r.Rand == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:]) // never fails on supported platforms
		r.Rand = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	return r
}

// machine returns the configuration of a Machine of this process on
// timing t, writing payload to store; its followers poll with the store's
// cheaper reads unless strong (see Config.StrongPolls), and it mints
// tokens from the wall clock on a store that may lose acknowledged writes
// (lease.Lossy). Every Machine of the package is configured here.
func (r *Runtime) machine(t Timing, payload []byte, store lease.Store, strong bool) election.Config {
	return election.Config{ID: r.ID, Timing: t, Payload: payload, Rand: r.Rand, Wall: wallOf(r.Clock),
		StaleReads: staleReads(store, strong), ClockTokens: lease.IsLossy(store)}
}

// staleReads reports whether followers of store poll with its stale reads.
func staleReads(store lease.Store, strong bool) bool {
	_, ok := store.(lease.StaleGetter)
	return ok && !strong
}

// noColdPolls rejects a ColdPollInterval where there is no standby to
// poll for (what names the config's user).
func noColdPolls(t Timing, what string) error {
	if t.ColdPollInterval != 0 {
		return fieldError(&election.FieldError{Field: "ColdPollInterval", Reason: "is set, but " + what + " has no standby"})
	}
	return nil
}

func fieldError(err error) error { return fmt.Errorf("tenure: config: %w", err) }

func (c *Config) machineConfig() election.Config {
	return c.machine(c.Timing, leaderaddr.Join(c.Addr, c.Payload), c.Store, c.StrongPolls)
}

// standbyConfig is the configuration of the standby record's Machine, on
// its own timing; standby.New adds the payload.
// Without Standby, a leader still reads the record (standby.NewWatch)
// at the cadence a standby's would have: ColdPollInterval's default.
func (c *Config) standbyConfig() election.Config {
	return c.machine(election.StandbyTiming(c.Timing.WithStandby()), nil, c.Store, c.StrongPolls)
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
