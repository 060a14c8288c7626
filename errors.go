package tenure

import "github.com/tenure-go/tenure/election"

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
