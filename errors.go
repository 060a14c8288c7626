package tenure

import (
	"fmt"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fencing"
)

// The errors a program matches on (errors.As, errors.Is), named here so
// that it need not import election.
type (
	// FieldError is a configuration field that breaks a rule: New,
	// NewLocker and Validate return one, naming the field and the rule.
	FieldError = election.FieldError
	// DuplicateIDError says that another process writes the lease with
	// this candidate's ID (in Status().Err, and logged once a minute).
	DuplicateIDError = election.DuplicateIDError
	// TimeoutError is a store call abandoned after OpTimeout; it wraps the
	// store's last error before it, which often says why.
	TimeoutError = election.TimeoutError
	// RecordLostError says that the lease's record vanished or went back.
	RecordLostError = election.RecordLostError
)

// ErrTimeout is matched by every *TimeoutError.
var ErrTimeout = election.ErrTimeout

// TermEndedError is the cause (context.Cause) of a term's context that
// ended with its term: which term, and why. A term handed over to a
// candidate of higher priority (ReasonHandedOver) ends on purpose, and its
// work may wind down calmly; one lost (ReasonLost, ReasonStoreUnavailable)
// may already have another holder.
type TermEndedError struct {
	Lease  string
	Token  fencing.Token
	Reason DemotionReason
}

func (e *TermEndedError) Error() string {
	return fmt.Sprintf("tenure: term %d of lease %q ended: %s", e.Token, e.Lease, e.Reason)
}
