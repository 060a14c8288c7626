package redislease

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
)

// TestIntegrationRetriedPutSucceeds: go-redis sends a script again when a
// connection broke after sending it; if the first attempt had applied,
// the second finds the version it carries and reports success, not a
// conflict (which would demote a leader whose renewal went through, or
// have a follower that took the lease believe it lost).
func TestIntegrationRetriedPutSucceeds(t *testing.T) {
	opt, err := redis.ParseURL(testservers.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	s, _ := New(c, Config{Prefix: testservers.UniqueName("retry") + ":"})
	ctx := t.Context()
	rec := lease.Record{Holder: "a", Token: 1, Duration: time.Second, Nonce: "n"}
	ver := recordjson.NewWriteID()
	body := recordjson.Encode(rec, ver)
	for attempt := range 2 {
		res, err := putScript.Run(ctx, c, []string{s.Key("x")}, "", ver, body).Slice()
		if err != nil || len(res) != 1 || res[0] != int64(1) {
			t.Fatalf("attempt %d: %v %v, want {1}", attempt+1, res, err)
		}
	}
	// Another call with the same record but a version of its own conflicts.
	if _, err := s.Put(ctx, "x", rec, lease.NoVersion); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("a second create: %v, want a conflict", err)
	}
	if _, v, err := s.Get(ctx, "x"); err != nil || v != lease.Version(ver) {
		t.Fatalf("stored version %q, %v; want %q", v, err, ver)
	}
}
