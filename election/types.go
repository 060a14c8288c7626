package election

import (
	"errors"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// ErrTimeout is the result the Machine assigns to a store call it abandoned
// after Config.OpTimeout. The call's outcome is unknown, like any other error.
var ErrTimeout = errors.New("election: store call timed out")

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
}

// Result is the outcome of an Op.
type Result struct {
	ID      uint64
	Record  lease.Record  // OpGet: the record read
	Version lease.Version // OpGet: its version; OpPut: the new version
	Err     error
}

// Term describes one leadership term of this Machine.
type Term struct {
	Holder   string
	Token    uint64
	Deadline time.Time // local deadline when the event was emitted
	Payload  []byte
}

// Leader is the leader as observed in the store: the holder of the latest
// record seen, or the zero Leader when the lease is absent or released. It
// says nothing about whether that holder is still alive.
type Leader struct {
	Holder  string
	Token   uint64
	Payload []byte
}

// Reason says why a term ended.
type Reason int

const (
	// ReasonLost: a renewal found the lease taken by another holder.
	ReasonLost Reason = iota + 1
	// ReasonExpired: the local deadline passed before a renewal was
	// confirmed, without any renewal failing (the process or the store was
	// too slow).
	ReasonExpired
	// ReasonStoreUnavailable: renewals failed with errors until the local
	// deadline passed.
	ReasonStoreUnavailable
	// ReasonShutDown: the candidate was stopped.
	ReasonShutDown
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
	}
	return "unknown reason"
}

// EventKind says what an Event reports.
type EventKind int

const (
	EventElected       EventKind = iota + 1 // a term began: Term
	EventDemoted                            // a term ended: Term, Reason
	EventLeaderChanged                      // the observed leader changed: Leader
)

// Event is something the driver must tell the program, in order.
type Event struct {
	Kind   EventKind
	Term   Term
	Reason Reason
	Leader Leader
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
}
