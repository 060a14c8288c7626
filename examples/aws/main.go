// Command aws runs one candidate against a real store: a DynamoDB table or an
// S3 bucket, on AWS or on any compatible endpoint. Start it in two or three
// terminals (or on two or three machines) with the same flags to watch them
// elect a leader; stop the leader with Ctrl-C to watch the handoff.
//
//	go run ./examples/aws -backend dynamodb -table tenure-leases -region eu-west-1 -create
//	go run ./examples/aws -backend s3 -bucket my-leases -prefix tenure/ -region eu-west-1
//	go run ./examples/aws -backend s3 -bucket leases -endpoint http://127.0.0.1:9000 -create
//
// Credentials come from the usual AWS sources (environment, shared config,
// instance role). With -endpoint and no credentials in the environment, set
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the server's keys.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
	"github.com/tenure-go/tenure/lease/s3lease"
)

func main() {
	var (
		backend  = flag.String("backend", "dynamodb", "store: dynamodb or s3")
		table    = flag.String("table", "", "DynamoDB table (with -backend dynamodb)")
		bucket   = flag.String("bucket", "", "S3 bucket (with -backend s3)")
		prefix   = flag.String("prefix", "tenure/", "S3 key prefix (with -backend s3)")
		region   = flag.String("region", "", "AWS region (default: from the AWS config, else us-east-1)")
		endpoint = flag.String("endpoint", "", "endpoint URL of a compatible server, e.g. http://127.0.0.1:9000")
		create   = flag.Bool("create", false, "create the table (on-demand) or bucket if missing")
		name     = flag.String("lease", "examples/aws", "lease name")
		id       = flag.String("id", "", "candidate identity (default: host-pid-random)")
		leaseFor = flag.Duration("lease-duration", 10*time.Second, "lease duration")
		duration = flag.Duration("duration", 0, "stop after this long (0: run until interrupted)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	store, err := openStore(ctx, *backend, *table, *bucket, *prefix, *region, *endpoint, *create)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws:", err)
		os.Exit(1)
	}
	if err := run(ctx, store, *name, *id, *leaseFor); err != nil {
		fmt.Fprintln(os.Stderr, "aws:", err)
		os.Exit(1)
	}
}

func openStore(ctx context.Context, backend, table, bucket, prefix, region, endpoint string, create bool) (lease.Store, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	setupCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	switch backend {
	case "dynamodb":
		if table == "" {
			return nil, errors.New("-backend dynamodb needs -table")
		}
		api := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
				// DynamoDB Local sends errors without the CRC32 header the
				// SDK checks, and the SDK would warn on each.
				o.DisableValidateResponseChecksum = true
			}
		})
		if create {
			if err := dynamolease.CreateTable(setupCtx, api, table, dynamolease.TableOptions{}); err != nil {
				return nil, err
			}
		}
		return dynamolease.New(api, dynamolease.Config{Table: table})
	case "s3":
		if bucket == "" {
			return nil, errors.New("-backend s3 needs -bucket")
		}
		client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
			if endpoint != "" { // an S3-compatible server
				o.BaseEndpoint = aws.String(endpoint)
				o.UsePathStyle = true
				o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
				o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			}
		})
		if create {
			if err := createBucket(setupCtx, client, bucket, awsCfg.Region); err != nil {
				return nil, err
			}
		}
		return s3lease.New(client, s3lease.Config{Bucket: bucket, Prefix: prefix})
	}
	return nil, fmt.Errorf("-backend %q: want dynamodb or s3", backend)
}

func createBucket(ctx context.Context, c *s3.Client, bucket, region string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region != "us-east-1" { // us-east-1 refuses an explicit constraint
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	_, err := c.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %q: %w", bucket, err)
	}
	return nil
}

func run(ctx context.Context, store lease.Store, name, id string, leaseFor time.Duration) error {
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("%7.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	c, err := tenure.New(tenure.Config{
		Lease:         name,
		Store:         store,
		ID:            id,
		LeaseDuration: leaseFor,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
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
