package lease_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tenure-go/tenure/lease"
)

func TestConflictError(t *testing.T) {
	held := &lease.ConflictError{
		Name:    "jobs/cron",
		Current: lease.Record{Holder: "node-2", Token: 7},
		Version: "v9",
		Found:   true,
	}
	missing := &lease.ConflictError{Name: "jobs/cron"}
	tests := []struct {
		err  *lease.ConflictError
		want string
	}{
		{held, `lease "jobs/cron": conflict: held by "node-2" with token 7`},
		{missing, `lease "jobs/cron": conflict: no record stored`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		// Backends wrap it with the operation; callers still find both.
		wrapped := fmt.Errorf("put: %w", tt.err)
		if !errors.Is(wrapped, lease.ErrConflict) {
			t.Errorf("%v does not match ErrConflict", wrapped)
		}
		for _, other := range []error{lease.ErrNotFound, lease.ErrInvalidRecord, lease.ErrInvalidName} {
			if errors.Is(wrapped, other) {
				t.Errorf("%v matches %v", wrapped, other)
			}
		}
		var ce *lease.ConflictError
		if !errors.As(wrapped, &ce) || ce != tt.err {
			t.Errorf("errors.As did not recover the *ConflictError from %v", wrapped)
		}
	}
}

func TestRecordError(t *testing.T) {
	err := error(&lease.RecordError{Name: "jobs/cron", Field: "token", Reason: "missing"})
	if got, want := err.Error(), `lease "jobs/cron": invalid record: token: missing`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("put: %w", err)
	if !errors.Is(wrapped, lease.ErrInvalidRecord) {
		t.Errorf("%v does not match ErrInvalidRecord", wrapped)
	}
	if errors.Is(wrapped, lease.ErrConflict) || errors.Is(wrapped, lease.ErrInvalidName) {
		t.Errorf("%v matches another sentinel", wrapped)
	}
	var re *lease.RecordError
	if !errors.As(wrapped, &re) || re.Field != "token" || re.Name != "jobs/cron" {
		t.Errorf("errors.As(%v) = %+v", wrapped, re)
	}
}

func TestNotFoundAndConflict(t *testing.T) {
	nf := lease.NotFound("jobs/cron")
	if got, want := nf.Error(), `lease "jobs/cron": lease: not found`; got != want {
		t.Errorf("NotFound: %q, want %q", got, want)
	}
	if !errors.Is(nf, lease.ErrNotFound) || errors.Is(nf, lease.ErrConflict) {
		t.Errorf("NotFound matches the wrong sentinels: %v", nf)
	}

	c := lease.Conflict("jobs/cron")
	if got, want := c.Error(), `lease "jobs/cron": lease: conflict`; got != want {
		t.Errorf("Conflict: %q, want %q", got, want)
	}
	if !errors.Is(c, lease.ErrConflict) || errors.Is(c, lease.ErrNotFound) {
		t.Errorf("Conflict matches the wrong sentinels: %v", c)
	}
	var ce *lease.ConflictError
	if errors.As(c, &ce) {
		t.Error("Conflict, which knows no current record, is a *ConflictError")
	}
}
