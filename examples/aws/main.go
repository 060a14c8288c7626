// Command aws runs one candidate against a real store: a DynamoDB table or an
// S3 bucket, on AWS or on any compatible endpoint, named by a store URL
// (package lease/storeurl). Start it in two or three terminals (or on two or
// three machines) with the same flags to watch them elect a leader; stop the
// leader with Ctrl-C to watch the handoff.
//
//	go run ./examples/aws -store 'dynamodb://tenure-leases?region=eu-west-1&create=true'
//	go run ./examples/aws -store 's3://my-leases/tenure/?region=eu-west-1'
//	go run ./examples/aws -store 's3://leases/tenure/?endpoint=http://127.0.0.1:9000&create=true'
//
// Credentials come from the usual AWS sources (environment, shared config
// and profiles, instance role). Against a local server with no credentials in
// the environment, set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the
// server's keys (DynamoDB Local takes any).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

func main() {
	var (
		storeURL = flag.String("store", "", "store URL: dynamodb://TABLE?region=..., s3://BUCKET/PREFIX?endpoint=...&create=true")
		name     = flag.String("lease", "examples/aws", "lease name")
		id       = flag.String("id", "", "candidate identity (default: host-pid-random)")
		leaseFor = flag.Duration("lease-duration", 10*time.Second, "lease duration")
		duration = flag.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	)
	flag.Parse()
	if *storeURL == "" {
		fmt.Fprintln(os.Stderr, "aws: -store is required, e.g. -store 'dynamodb://tenure-leases?region=eu-west-1&create=true'")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	store, err := storeurl.Open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws:", err)
		os.Exit(1)
	}
	if err := run(ctx, store, *name, *id, *leaseFor); err != nil {
		fmt.Fprintln(os.Stderr, "aws:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, store lease.Store, name, id string, leaseFor time.Duration) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("%7.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	c, err := tenure.New(tenure.Config{
		Lease: name,
		Store: store,
		Runtime: tenure.Runtime{
			ID:     id,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		},
		Timing: tenure.Timing{LeaseDuration: leaseFor},
		Callbacks: tenure.Callbacks{
			OnElected: func(ctx context.Context, term tenure.Term) {
				say("elected token=%d; leading until the context ends", term.Token)
			},
			OnDemoted: func(term tenure.Term, reason tenure.DemotionReason) {
				say("demoted token=%d (%v)", term.Token, reason)
			},
			OnLeaderChange: func(l tenure.Leader) {
				if l.Holder == "" {
					say("no leader")
					return
				}
				say("leader is %s (token=%d)", l.Holder, l.Token)
			},
		},
	})
	if err != nil {
		return err
	}
	say("%s campaigns for %q (lease %v); Ctrl-C to leave", c.ID(), name, leaseFor)
	err = c.Run(ctx)
	say("stopped")
	return err
}
