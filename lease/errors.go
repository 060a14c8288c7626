package lease

import (
	"errors"
	"fmt"
)

var (
	// ErrConflict reports that a compare-and-swap failed: the stored version
	// was not the expected one. Stores translate their own signal into it
	// (DynamoDB ConditionalCheckFailedException, S3 HTTP 412).
	ErrConflict = errors.New("lease: conflict")

	// ErrNotFound reports that no record is stored under the name.
	ErrNotFound = errors.New("lease: not found")

	// ErrInvalidRecord reports a record that breaks the rules of Validate,
	// whether the caller passed it or it was found in the store.
	ErrInvalidRecord = errors.New("lease: invalid record")

	// ErrInvalidName reports a lease name that breaks the rules of ValidateName.
	ErrInvalidName = errors.New("lease: invalid name")

	// ErrPermanent marks an error that retrying the same call cannot cure: the
	// table or bucket does not exist, access is denied, the request is
	// malformed or a key is too long. Stores wrap such errors with Permanent;
	// tenure fails fast on one at the start of Run, and otherwise logs it at
	// error level while it keeps retrying (an operator may fix it).
	ErrPermanent = errors.New("lease: permanent error")
)

// Permanent returns err marked as permanent: errors.Is(err, ErrPermanent)
// holds, and errors.Is and errors.As still find what err wraps. It returns
// nil for nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// ConflictError is a conflict that carries what the store holds now, for
// stores that learn it without a second request. It matches ErrConflict under
// errors.Is.
type ConflictError struct {
	Name string
	// Current and Version describe the stored record. Found is false when no
	// record exists.
	Current Record
	Version Version
	Found   bool
}

func (e *ConflictError) Error() string {
	if !e.Found {
		return fmt.Sprintf("lease %q: conflict: no record stored", e.Name)
	}
	return fmt.Sprintf("lease %q: conflict: held by %q with token %d", e.Name, e.Current.Holder, e.Current.Token)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// RecordError is an invalid record: it names the lease and the field at fault.
// It matches ErrInvalidRecord under errors.Is.
type RecordError struct {
	Name   string // lease name
	Field  string // record field, e.g. "token"
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("lease %q: invalid record: %s: %s", e.Name, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidRecord) true.
func (e *RecordError) Is(target error) bool { return target == ErrInvalidRecord }

// NotFound returns an error for a missing record that names the lease and wraps
// ErrNotFound.
func NotFound(name string) error {
	return fmt.Errorf("lease %q: %w", name, ErrNotFound)
}

// Conflict returns an error for a failed compare-and-swap whose current record
// is unknown. It names the lease and wraps ErrConflict.
func Conflict(name string) error {
	return fmt.Errorf("lease %q: %w", name, ErrConflict)
}
