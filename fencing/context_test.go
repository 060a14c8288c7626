package fencing_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
)

func TestContextCarriesFence(t *testing.T) {
	if f, ok := fencing.FromContext(context.Background()); ok || f != (fencing.Fence{}) {
		t.Fatalf("FromContext(Background) = %v, %t; want none", f, ok)
	}
	want := fencing.Fence{Lease: "jobs/cron", Token: 7}
	ctx := fencing.NewContext(context.Background(), want)
	if f, ok := fencing.FromContext(ctx); !ok || f != want {
		t.Fatalf("FromContext = %v, %t; want %v", f, ok, want)
	}

	// The fence outlives the term's cancellation: a write already under
	// way must still present it.
	term, cancel := context.WithCancel(ctx)
	cancel()
	if f, ok := fencing.FromContext(term); !ok || f != want {
		t.Errorf("FromContext of a cancelled child = %v, %t; want %v", f, ok, want)
	}

	// A nested NewContext replaces the fence for its subtree only.
	next := fencing.Fence{Lease: "jobs/cron", Token: 8}
	inner := fencing.NewContext(ctx, next)
	if f, _ := fencing.FromContext(inner); f != next {
		t.Errorf("inner fence = %v, want %v", f, next)
	}
	if f, _ := fencing.FromContext(ctx); f != want {
		t.Errorf("outer fence changed to %v", f)
	}
}

func TestFenceValidate(t *testing.T) {
	if fencing.MaxLeaseLen != lease.MaxNameLen {
		t.Errorf("MaxLeaseLen = %d, lease.MaxNameLen = %d: every lease name must fit in a Fence", fencing.MaxLeaseLen, lease.MaxNameLen)
	}
	good := []fencing.Fence{
		{Lease: "a", Token: 1},
		{Lease: "app/cron:eu-west-1_v2.x", Token: ^fencing.Token(0)},
		{Lease: strings.Repeat("x", fencing.MaxLeaseLen), Token: 3},
	}
	for _, f := range good {
		if err := f.Validate(); err != nil {
			t.Errorf("Validate(%v): %v", f, err)
		}
		if err := lease.ValidateName(f.Lease); err != nil {
			t.Fatalf("test case %v is not a valid lease name: %v", f, err)
		}
	}
	bad := map[string]fencing.Fence{
		"zero token":    {Lease: "a"},
		"1 to 200":      {Token: 1},
		"200":           {Lease: strings.Repeat("x", fencing.MaxLeaseLen+1), Token: 1},
		"byte 1 (0x20)": {Lease: "a b", Token: 1},
		"byte 1 (0x0a)": {Lease: "a\nb", Token: 1},
		"byte 1 (0xc3)": {Lease: "aé", Token: 1},
	}
	for reason, f := range bad {
		err := f.Validate()
		if err == nil || !strings.Contains(err.Error(), reason) {
			t.Errorf("Validate(%v) = %v, want an error saying %q", f, err, reason)
		}
	}
}

func TestFenceString(t *testing.T) {
	if got, want := (fencing.Fence{Lease: "jobs/cron", Token: 7}).String(), `lease "jobs/cron" token 7`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
