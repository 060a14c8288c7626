// Package storekit holds what every lease.Store backend does the same way
// around its own requests: the checks made before anything is sent, and the
// context's error put first in an error from a call it cut short.
package storekit

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/lease"
)

// CheckGet returns the error a Get must return without sending anything:
// an invalid name, or a context already done.
func CheckGet(ctx context.Context, name string) error { return check(ctx, "get", name) }

// CheckDelete is CheckGet for a Delete.
func CheckDelete(ctx context.Context, name string) error { return check(ctx, "delete", name) }

// CheckPut is CheckGet for a Put, and checks the record too.
func CheckPut(ctx context.Context, name string, rec lease.Record) error {
	if err := lease.ValidateName(name); err != nil {
		return fmt.Errorf("put lease: %w", err)
	}
	if err := rec.Validate(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put lease %q: %w", name, err)
	}
	return nil
}

func check(ctx context.Context, op, name string) error {
	if err := lease.ValidateName(name); err != nil {
		return fmt.Errorf("%s lease: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s lease %q: %w", op, name, err)
	}
	return nil
}

// Cause returns err from a call made with ctx, wrapping ctx's error first
// when ctx has ended and err does not say so: a client library may report a
// deadline as its own error, and callers test errors.Is(err,
// context.DeadlineExceeded).
func Cause(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}
