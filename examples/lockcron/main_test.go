package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Five replicas whose clocks tick up to 500ms apart run each of 20 slots
// exactly once.
func TestEverySlotOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		ran, err := run(context.Background(), &out, 5, time.Second, 20*time.Second, 500*time.Millisecond)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if len(ran) != 20 {
			t.Fatalf("%d slots ran, want 20:\n%s", len(ran), out.String())
		}
	})
}
