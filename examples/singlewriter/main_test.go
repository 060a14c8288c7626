package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/testservers"
)

var defaults = options{lease: 2 * time.Second, every: 300 * time.Millisecond}

// The default run, in fake time: the zombie's late write is refused and the
// new leader's write stays.
func TestSingleWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		o, err := run(t.Context(), &out, defaults, &memResource{})
		if err != nil {
			t.Fatal(err)
		}
		// A new lease's first token is the time in Unix milliseconds: in a
		// synctest bubble, 2000-01-01.
		first := fencing.Token(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
		var se *fencing.StaleTokenError
		if !errors.As(o.lateErr, &se) || se.Presented != first || se.Current != first+1 {
			t.Errorf("late write: %v, want token %d refused after token %d", o.lateErr, first, first+1)
		}
		if !o.ok() || o.newLeader != "node-2" || !strings.HasPrefix(o.final, "node-2 ") {
			t.Errorf("outcome %+v: want the resource to hold node-2's write", o)
		}
		for _, want := range []string{"node-1 FREEZES", "node-2 elected, token " + (first + 1).String(), "late write REJECTED", "intact"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

// Without the fence check the same story corrupts the resource, and the run
// says so: the demo can fail.
func TestSingleWriterUnfenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		o, err := run(t.Context(), &out, defaults, &memResource{unfenced: true})
		if err != nil {
			t.Fatal(err)
		}
		if o.ok() || o.lateErr != nil || !strings.HasPrefix(o.final, "node-1 ") {
			t.Errorf("outcome %+v: want the late write accepted over node-2's", o)
		}
		if !strings.Contains(out.String(), "late write ACCEPTED") || !strings.Contains(out.String(), "CORRUPTED") {
			t.Errorf("output does not report the corruption:\n%s", out.String())
		}
	})
}

// The run takes about as long as the story needs, even with a long lease: the
// next leader takes over once the lease has expired.
func TestSingleWriterDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		o, err := run(t.Context(), &bytes.Buffer{}, options{lease: 10 * time.Second, every: time.Second}, &memResource{})
		if err != nil || !o.ok() {
			t.Fatalf("run: %+v, %v", o, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("run took %v with a 10s lease, want well under 30s", d)
		}
	})
}

var fast = options{lease: time.Second, every: 150 * time.Millisecond}

func TestIntegrationSingleWriterDynamoDB(t *testing.T) {
	c := testservers.DynamoDB(t)
	table := testservers.UniqueName("tenure-singlewriter")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := newDynamoResource(ctx, c, table, "state")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	var out bytes.Buffer
	o, err := run(ctx, &out, fast, res)
	if err != nil || !o.ok() {
		t.Fatalf("run: %+v, %v\n%s", o, err, out.String())
	}
}

func TestIntegrationSingleWriterS3(t *testing.T) {
	for _, srv := range testservers.S3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			c := srv.Client()
			res, err := newS3Resource(c, testservers.NewBucket(t, c), "singlewriter/state")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			o, err := run(ctx, &out, fast, res)
			if err != nil || !o.ok() {
				t.Fatalf("run: %+v, %v\n%s", o, err, out.String())
			}
		})
	}
}
