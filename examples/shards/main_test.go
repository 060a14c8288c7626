package main

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure"
)

// The default run, in fake time: the partitions move as replicas come and
// go, the cut-off replica's commits are refused once each of its
// partitions has a new owner, and a holds every partition at the end.
func TestShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		o, err := run(t.Context(), &out, options{shards: 8, lease: 2 * time.Second, duration: 20 * time.Second, wake: tenure.NoWake})
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatal(err)
		}
		if o.refused == 0 || o.commits == 0 {
			t.Fatalf("%d commits, %d refused: want b's zombie commits refused", o.commits, o.refused)
		}
	})
}
