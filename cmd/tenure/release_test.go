package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/leasetest"
	"github.com/tenure-go/tenure/lease/memlease"
)

// A renewal that lands between release --force's read and its write makes
// the write conflict; the release reads and tries again, rather than exit
// 75 for a race an operator cannot win by hand.
func TestReleaseRetriesRenewals(t *testing.T) {
	ctx := context.Background()
	mem := memlease.New()
	held := lease.Record{Holder: "a", Token: 7, Duration: 10 * time.Second, Nonce: "n0", WrittenAt: time.Now()}
	ver, err := mem.Put(ctx, "job", held, lease.NoVersion)
	if err != nil {
		t.Fatal(err)
	}
	store := leasetest.NewFaults(mem)
	renewals := 0
	store.SetHook(func(op, name string) error {
		if op == "put" && renewals < 4 { // the holder renews just before the first four tries' writes
			renewals++
			held.Nonce = strings.Repeat("r", renewals)
			v, err := mem.Put(ctx, name, held, ver)
			if err != nil {
				t.Errorf("renewal: %v", err)
			}
			ver = v
		}
		return nil
	})
	o := &releaseOpts{name: "job", holder: forceHolder, ttl: 10 * time.Second}
	var out, errs strings.Builder
	if status := o.releaseRetrying(ctx, store, &out, &errs); status != 0 {
		t.Fatalf("release --force under %d renewals: exit %d, %s%s", renewals, status, out.String(), errs.String())
	}
	rec, _, err := mem.Get(ctx, "job")
	if err != nil || rec.Holder != forceHolder || rec.Token != 8 || rec.Released {
		t.Fatalf("after the release: %+v, %v; want held by %s at token 8", rec, err, forceHolder)
	}
}
