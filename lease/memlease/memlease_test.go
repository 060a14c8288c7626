package memlease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

func TestConformance(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store { return memlease.New() })
}

func TestConformanceZeroValue(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) lease.Store { return new(memlease.Store) })
}

// A zero Store answers reads before its first write creates its map.
func TestZeroValue(t *testing.T) {
	ctx := t.Context()
	var s memlease.Store
	if _, _, err := s.Get(ctx, "x"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("Get on a zero Store: %v, want ErrNotFound", err)
	}
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	if _, err := s.Put(ctx, "x", rec, "1"); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Put expecting a version on a zero Store: %v, want ErrConflict", err)
	}
	v, err := s.Put(ctx, "x", rec, lease.NoVersion)
	if err != nil {
		t.Fatalf("Put on a zero Store: %v", err)
	}
	got, gotV, err := s.Get(ctx, "x")
	if err != nil || !got.Equal(rec) || gotV != v {
		t.Fatalf("Get = %+v, %q, %v; want %+v, %q", got, gotV, err, rec, v)
	}
}

// Stores are independent: one Store's records are not another's.
func TestStoresIndependent(t *testing.T) {
	ctx := t.Context()
	a, b := memlease.New(), memlease.New()
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	if _, err := a.Put(ctx, "x", rec, lease.NoVersion); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Get(ctx, "x"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("a record written to one Store shows in another: %v", err)
	}
}
