// Package lease is the vocabulary shared by tenure and its stores: the Store
// contract, the Record a store keeps for each lease, and the errors a store
// returns.
//
// A Store keeps one Record per lease name and offers compare-and-swap on it.
// Every backend (lease/memlease, lease/dynamolease, lease/s3lease) must pass the
// conformance suite in lease/leasetest.
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
