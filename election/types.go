package election

import (
	"errors"
	"fmt"
	"github.com/tenure-go/tenure/fencing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// ErrTimeout is matched (errors.Is) by the *TimeoutError the Machine assigns
// to a store call it abandoned after Config.OpTimeout. The call's outcome is
// unknown, like any other error's.
var ErrTimeout = errors.New("election: store call timed out")

// TimeoutError is a store call abandoned after Config.OpTimeout. It names the
// operation and wraps the last error a store call returned before it, which
// often says why (connection refused, a DNS failure), or nil.
type TimeoutError struct {
	Op    string // "read", "acquire", "renew", "release" or "read back"
	After time.Duration
	Last  error
}

func (e *TimeoutError) Error() string {
	if e.Last == nil {
		return fmt.Sprintf("election: %s timed out after %v (no earlier store error)", e.Op, e.After)
	}
	return fmt.Sprintf("election: %s timed out after %v; last store error: %v", e.Op, e.After, e.Last)
}

// Is makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// Unwrap returns the last earlier store error.
func (e *TimeoutError) Unwrap() error { return e.Last }

// RecordLostError reports a lease record that vanished, or whose token went
// below one seen before: an operator's delete, a TTL or lifecycle rule, a
// restored backup, a store that lost its data. The Machine then waits out
// the longest lease it has seen before taking the lease, and mints a token
// above every token it has seen.
type RecordLostError struct {
	Seen  uint64 // highest token seen before
	Found bool   // false: the record is absent
	Token uint64 // when Found: the token the record holds now
}

func (e *RecordLostError) Error() string {
	if !e.Found {
		return fmt.Sprintf("lease record absent after token %d: deleted, expired by a TTL or lifecycle rule, or lost by the store", e.Seen)
	}
	return fmt.Sprintf("lease record's token went from %d to %d: an older record was written back", e.Seen, e.Token)
}

// DuplicateIDError reports a record that holds this machine's ID with a
// write it did not make: another process is configured with the same ID, and
// each would take the other's leadership for its own.
type DuplicateIDError struct {
	ID    string
	Token uint64
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("election: another process writes the lease with this candidate's ID %q (token %d): IDs must differ between processes", e.ID, e.Token)
}

// OpKind says which store call an Op is.
type OpKind int

const (
	OpGet OpKind = iota + 1 // lease.Store.Get
	OpPut                   // lease.Store.Put
)

func (k OpKind) String() string {
	switch k {
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	}
	return "op(?)"
}

// Op is a store call the driver must start at once. At most one Op is in
// flight at a time; the driver reports its outcome with Machine.Done.
type Op struct {
	ID     uint64
	Kind   OpKind
	Record lease.Record  // OpPut: the record to write; WrittenAt is the driver's to fill in
	Expect lease.Version // OpPut: the version the write expects
	// Stale: an OpGet that a stale answer may serve
	// (lease.StaleGetter.GetStale): a follower's poll, with
	// Config.StaleReads.
	Stale bool
}

// Result is the outcome of an Op.
type Result struct {
	ID      uint64
	Record  lease.Record  // OpGet: the record read
	Version lease.Version // OpGet: its version; OpPut: the new version
	Err     error
}

// Term describes one leadership term.
type Term struct {
	// Lease names the lease. A Machine never sees names: its host fills
	// this in (the Machine's own events leave it empty).
	Lease  string
	Holder string // the holder's ID: this candidate's
	// Token is the term's fencing token: higher than every earlier term's.
	Token fencing.Token
	// Deadline is the local deadline when the term began (or when the
	// event was emitted); each renewal moves it later. The term's context
	// is cancelled by then at the latest.
	Deadline time.Time
	Payload  []byte
}

// Fence returns what the term's writes present to a fenced resource.
func (t Term) Fence() fencing.Fence { return fencing.Fence{Lease: t.Lease, Token: t.Token} }

// Leader is the leader as observed in the store: the holder of the latest
// record seen, or the zero Leader when the lease is absent or released. It
// says nothing about whether that holder is still alive: followers only
// learn that by waiting out its lease.
type Leader struct {
	Holder  string // the leader's ID; empty when there is no leader
	Token   fencing.Token
	Payload []byte
	// Addr is the address the leader serves on (tenure.Config.Addr), ""
	// if it publishes none.
	Addr string
}

// Reason says why a term ended.
type Reason int

const (
	// ReasonLost: a renewal found the lease taken by another holder.
	ReasonLost Reason = iota + 1
	// ReasonExpired: the local deadline passed before a renewal was
	// confirmed, though none failed: the store or this process was too
	// slow.
	ReasonExpired
	// ReasonStoreUnavailable: renewals failed until the local deadline.
	ReasonStoreUnavailable
	// ReasonShutDown: the candidate was stopped (a Candidate's Run's
	// context is done, or a callback panicked).
	ReasonShutDown
	// ReasonRecordLost: a renewal found the record absent, or written back
	// with an older token (deleted by hand, a TTL or lifecycle rule, a
	// restored backup). Logged at error level: see "Lost records" in
	// tenure's package documentation.
	ReasonRecordLost
	// ReasonInvalidRecord: the store holds a record tenure cannot read,
	// written by something else or corrupted. Logged at error level.
	ReasonInvalidRecord
	// ReasonResigned: the candidate resigned (Candidate.Resign).
	ReasonResigned
	// ReasonHandedOver: a live candidate of higher priority was waiting
	// (tenure's Config.Priority), and the lease was given back for it to
	// take (Machine.HandOver).
	ReasonHandedOver
)

func (r Reason) String() string {
	switch r {
	case ReasonLost:
		return "lost to another holder"
	case ReasonExpired:
		return "deadline passed without renewal"
	case ReasonStoreUnavailable:
		return "store unavailable"
	case ReasonShutDown:
		return "shut down"
	case ReasonRecordLost:
		return "lease record lost"
	case ReasonInvalidRecord:
		return "invalid lease record"
	case ReasonResigned:
		return "resigned"
	case ReasonHandedOver:
		return "handed over"
	}
	return "unknown reason"
}

// EventKind says what an Event reports.
type EventKind int

const (
	EventElected       EventKind = iota + 1 // a term began: Term
	EventDemoted                            // a term ended: Term, Reason
	EventLeaderChanged                      // the observed leader changed: Leader
	EventAnomaly                            // the store or another process misbehaves: Err, to log as an error
)

// Event is something the driver must tell the program, in order.
type Event struct {
	Kind   EventKind
	Term   Term
	Reason Reason
	Leader Leader
	Err    error // EventAnomaly: *RecordLostError, *DuplicateIDError or an invalid record
}

// Output is what the driver must do after handing the Machine an input.
type Output struct {
	// Op, when not nil, is a store call to start now.
	Op *Op
	// Abandon, when not zero, is the ID of an Op the Machine gave up on
	// (timed out): the driver should cancel it. Its result is ignored.
	Abandon uint64
	// Events are to be delivered in order. An EventDemoted is emitted at or
	// before the term's deadline, so the driver cancels the term at once.
	Events []Event
	// Wake, when not zero, is the instant at which the driver must call Tick
	// (or sooner, with any other input).
	Wake time.Time
	// Done reports that the Machine has finished after Release: nothing more
	// will happen.
	Done bool
	// Unchanged reports that Leader, Term and Err report what they did
	// after the previous Output, so that a driver need not read them again.
	Unchanged bool
}
