// Package lease is the vocabulary shared by tenure and its stores: the Store
// contract, the Record a store keeps for each lease, and the errors a store
// returns.
//
// A Store keeps one Record per lease name and offers compare-and-swap on it.
// Every backend (lease/memlease, lease/filelease, lease/dynamolease,
// lease/s3lease, lease/pglease, lease/etcdlease, lease/gcslease,
// lease/azbloblease, lease/k8slease, lease/redislease, lease/natslease)
// must pass the conformance suite in lease/leasetest.
//
// A store of your own does what these do before each call: CheckGet,
// CheckPut or CheckDelete first (an invalid name or record, a context
// done: nothing sent), and CallError on what its client returns, so that
// a deadline shows as context.DeadlineExceeded; then leasetest.Run and
// leasetest.Race against the real server.
package lease

import "context"

// Version identifies one stored state of a record. It is opaque to callers:
// they only hand back a Version they were given. Stores assign versions; a
// version is never reused for the same lease name, so a compare-and-swap that
// names an old version can never succeed again (no ABA).
type Version string

// NoVersion is the expected version of a lease that must not exist yet.
const NoVersion Version = ""

// Store keeps one Record per lease name and writes it only by compare-and-swap.
//
// Implementations must be safe for concurrent use, and reads must be
// linearizable: a Get that starts after a Put returned sees that write or a
// later one. A write that returns an error other than a conflict may or may not
// have been applied (the response may have been lost); callers resolve this by
// reading the record back and comparing its Nonce.
//
// What a store keeps must read back equal (Record.Equal) to what was written,
// with two allowances: WrittenAt may be truncated, to no coarser than a
// millisecond, and a nil Payload and an empty one are the same. A zero
// WrittenAt reads back as zero. Records returned share no memory with the
// store or with the caller's arguments. A call whose context is already done
// returns an error wrapping the context's error and changes nothing.
// lease/leasetest checks all of this.
type Store interface {
	// Get returns the record stored under name and its version. It returns an
	// error wrapping ErrNotFound if no record exists.
	Get(ctx context.Context, name string) (Record, Version, error)

	// Put stores rec under name if the stored version is still expect, or, when
	// expect is NoVersion, only if no record exists. It returns the new version.
	//
	// When the stored version differs (or a record exists although expect is
	// NoVersion, or none exists although expect names a version), Put returns an error that wraps ErrConflict; where the backend
	// learns the current record without a second request, the error is a
	// *ConflictError that carries it. Put rejects an invalid rec with an error
	// wrapping ErrInvalidRecord before sending anything.
	Put(ctx context.Context, name string, rec Record, expect Version) (Version, error)
}

// StaleGetter is a Store that can also read more cheaply where a stale
// answer will do (DynamoDB's eventually consistent GetItem, half the price
// of a strongly consistent one). GetStale returns what Get would have
// returned at some recent moment: a record (or its absence) that the store
// held then, maybe not the latest, and never one that was not written. It
// need not be monotonic: a later GetStale may return an older state.
//
// tenure's followers poll with it: a stale answer can only delay a takeover
// (the wait restarts when the record seems to change) or send a
// compare-and-swap that fails. A stale answer that would have a follower act
// (the lease free, or the record gone back) is read again with Get first.
type StaleGetter interface {
	GetStale(ctx context.Context, name string) (Record, Version, error)
}

// Watcher is a Store that can tell of each write of a record as it
// happens: a change feed (a Kubernetes or etcd watch, PostgreSQL
// LISTEN/NOTIFY). tenure's followers read on its events instead of waiting
// for their next poll, so that a follower sees each renewal a round trip
// after it was made and a release at once, without knowing anyone's
// address.
//
// An event carries no authority. A follower reads sooner on one, or, where
// the event carries the record written and that record renews the very
// term the follower last read (the same holder, token and lease duration),
// times the lease from the event's arrival as it would from a read that
// found it: the write was made before the feed told of it, so the wait
// can only start later, never sooner. Anything else it reads. A takeover
// is a compare-and-swap on the version last heard of, so a renewal the
// feed lost makes it fail and costs a read. So a feed may be late, lose
// events, repeat them or reorder them: that costs at most a poll of
// failover, never safety. A feed must only tell of writes that were made.
type Watcher interface {
	// Watch calls fn once it listens, and then after each write of the
	// record under name, until ctx is done; then it returns an error
	// wrapping ctx's. Calls of fn come from one goroutine at a time and
	// must not block for long. When the feed breaks, Watch listens again
	// by itself and calls fn with NoVersion (something may have been
	// missed). It returns early, with an error, only when the store will
	// not tell (permissions, a server without a feed): callers then poll.
	Watch(ctx context.Context, name string, fn func(Event)) error
}

// Event is a write a Watcher tells of.
type Event struct {
	// Version is the version written; NoVersion when the feed (re)started
	// or a record was deleted, or the store does not say.
	Version Version
	// Released is set when the write gave the lease back.
	Released bool
	// Record is the record written, where the feed carries it (Kubernetes
	// and etcd watches, PostgreSQL's notifications): its Holder, Token,
	// Duration and Released at least (Payload, Nonce and WrittenAt may be
	// left out); nil where the feed tells only a version.
	Record *Record
}

// AnyVersion, as Deleter.Delete's expect, deletes whatever is stored: a
// record that no one can decode (ErrInvalidRecord) has no version to name.
const AnyVersion Version = "*"

// Lister is a Store that can list the records it keeps, for operators'
// tools (tenure list, tenure gc); tenure's protocol never lists.
type Lister interface {
	// List calls fn with the name of every record whose name starts with
	// prefix, in no set order, until fn returns an error, which List
	// returns. A record written or deleted during List may or may not be
	// listed.
	List(ctx context.Context, prefix string, fn func(name string) error) error
}

// OneHost is a Store that only processes on one host can share (a
// directory, memory): what they send each other, wake-ups, stays on
// loopback by default.
type OneHost interface {
	OneHost() bool
}

// Deleter is a Store that can delete a record by compare-and-swap, so that
// records no longer needed can be removed without ever removing one that
// changed since it was read (tenure gc, tenure release --force).
type Deleter interface {
	// Delete removes the record stored under name if its version is still
	// expect, or, with AnyVersion, whatever record is stored. It returns an
	// error wrapping ErrConflict if the stored version differs. Deleting a
	// missing record changes nothing and returns nil or an error wrapping
	// ErrNotFound or ErrConflict, as the backend tells. Like Put, a Delete
	// that returns another error may or may not have been applied.
	Delete(ctx context.Context, name string, expect Version) error
}

// Lossy is a Store that may lose writes it acknowledged: a Redis primary
// fails over to a replica that had not received them, a NATS server
// restarts before it flushed them to disk. A lost write is a lost record
// (the record vanishes, or goes back to an earlier state with that state's
// version), which the protocol already survives; what it adds is that a
// term whose takeover was lost left no trace of its token. So on a Lossy
// store every takeover mints at least the wall time in Unix milliseconds
// (election.Config.ClockTokens), and tokens keep rising across the loss
// as long as clocks agree more closely than the time between the lost
// write and the next takeover.
type Lossy interface {
	// Lossy reports whether the store, as configured, may lose
	// acknowledged writes.
	Lossy() bool
}

// IsLossy reports whether s is a Lossy store that says it may lose
// acknowledged writes.
func IsLossy(s Store) bool {
	l, ok := s.(Lossy)
	return ok && l.Lossy()
}
