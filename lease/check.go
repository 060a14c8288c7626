package lease

import (
	"context"
	"errors"
	"fmt"
)

// What every Store does the same way around its own requests, for the
// stores of this module and third-party ones alike: the checks made
// before anything is sent, and the context's error put first in the error
// of a call it cut short.

// CheckGet returns the error a Get must return without sending anything:
// an invalid name (ErrInvalidName), or a context already done.
func CheckGet(ctx context.Context, name string) error { return check(ctx, "get", name) }

// CheckDelete is CheckGet for a Delete.
func CheckDelete(ctx context.Context, name string) error { return check(ctx, "delete", name) }

// CheckPut is CheckGet for a Put, and checks the record too
// (Record.Validate).
func CheckPut(ctx context.Context, name string, rec Record) error {
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("put lease: %w", err)
	}
	if err := rec.Validate(name); err != nil {
		return fmt.Errorf("put %w", err) // put lease "x": invalid record: ...
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put lease %q: %w", name, err)
	}
	return nil
}

func check(ctx context.Context, op, name string) error {
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("%s lease: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s lease %q: %w", op, name, err)
	}
	return nil
}

// CallError returns err, from a call made with ctx, with ctx's error
// wrapped first when ctx has ended and err does not say so: a client
// library may report a deadline as its own error, and callers test
// errors.Is(err, context.DeadlineExceeded).
func CallError(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}
