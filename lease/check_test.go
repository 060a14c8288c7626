package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The checks a store makes before it sends anything, in their order: the
// name, the record, the context.
func TestChecks(t *testing.T) {
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	good := Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	var re *RecordError
	for _, c := range []struct {
		what string
		err  error
		is   error
	}{
		{"get, bad name", CheckGet(done, "a//b"), ErrInvalidName},
		{"get, done", CheckGet(done, "a"), context.Canceled},
		{"delete, bad name", CheckDelete(ctx, ""), ErrInvalidName},
		{"delete, done", CheckDelete(done, "a"), context.Canceled},
		{"put, bad name", CheckPut(done, "a//b", good), ErrInvalidName},
		{"put, bad record", CheckPut(done, "a", Record{Token: 1, Duration: time.Second, Nonce: "n"}), ErrInvalidRecord},
		{"put, done", CheckPut(done, "a", good), context.Canceled},
	} {
		if !errors.Is(c.err, c.is) {
			t.Errorf("%s: %v, want an error wrapping %v", c.what, c.err, c.is)
		}
	}
	if !errors.As(CheckPut(ctx, "a", Record{}), &re) {
		t.Error("a bad record: not a *RecordError")
	}
	if CheckGet(ctx, "a") != nil || CheckDelete(ctx, "a") != nil || CheckPut(ctx, "a", good) != nil {
		t.Error("a good call refused")
	}
	// A client's own timeout error, once the deadline passed, is also the
	// context's.
	own := errors.New("client: request timed out")
	late, stop := context.WithDeadline(ctx, time.Unix(0, 0))
	defer stop()
	if err := CallError(late, own); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(CallError(ctx, own), own) {
		t.Errorf("CallError: %v", err)
	}
}
