//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"cirello.io/dynamolock/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tenure-go/tenure/election"
)

// dynamolockCandidate campaigns with cirello.io/dynamolock on the table of
// a dynamodb:// store URL (tenure's table: its partition key "lease" is a
// string, as dynamolock's must be), as a dynamolock user elects a leader:
// AcquireLock, retried every poll, with heartbeats every renewal interval;
// it leads until Lock.IsExpired, and releases the lock on SIGTERM. It
// reports as candidate does, and counts its DynamoDB calls at the HTTP
// client (GetItem as reads, the rest as writes). Once it has stopped
// leading it does not campaign again, as clientgoCandidate.
func dynamolockCandidate(storeURL, name, id string, t election.Timing) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "dynamodb" {
		return fmt.Errorf("%q: dynamolock needs a dynamodb:// store", storeURL)
	}
	q := u.Query()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(q.Get("region")))
	if err != nil {
		return err
	}
	var count dynamoCount
	api := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if ep := q.Get("endpoint"); ep != "" {
			o.BaseEndpoint = aws.String(ep)
			o.DisableValidateResponseChecksum = true // DynamoDB Local sends none
		}
		o.HTTPClient = countingDoer{&http.Client{}, &count}
	})
	key := q.Get("key")
	if key == "" {
		key = "lease"
	}
	c, err := dynamolock.New(api, u.Host,
		dynamolock.WithPartitionKeyName(key),
		dynamolock.WithOwnerName(id),
		dynamolock.WithLeaseDuration(t.LeaseDuration),
		dynamolock.WithHeartbeatPeriod(t.RenewInterval))
	if err != nil {
		return err
	}
	defer c.Close()
	say := func(format string, args ...any) {
		fmt.Printf("%d %s\n", time.Now().UnixNano(), fmt.Sprintf(format, args...))
	}
	var held atomic.Pointer[dynamolock.Lock]
	onStats(say, func() (int64, int64) { return count.gets.Load(), count.puts.Load() })
	go probe(ctx, func() bool { return !held.Load().IsExpired() }, say)
	say("started")
	lock, err := c.AcquireLockWithContext(ctx, name,
		dynamolock.WithRefreshPeriod(t.PollInterval),
		dynamolock.WithAdditionalTimeToWaitForLock(24*time.Hour))
	if err != nil {
		<-ctx.Done() // stopped while waiting
		return nil
	}
	held.Store(lock)
	say("elected 0")
	// A dynamolock holder learns that it lost the lock from IsExpired
	// (its own clock, from its last heartbeat): asked here every 10 ms.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !lock.IsExpired() && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	if ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = c.ReleaseLockWithContext(rctx, lock)
		cancel()
	}
	say("over 0")
	say("demoted lost")
	<-ctx.Done()
	return nil
}

// dynamoCount counts DynamoDB calls: GetItem as reads, the rest as writes.
type dynamoCount struct{ gets, puts atomic.Int64 }

type countingDoer struct {
	c     *http.Client
	count *dynamoCount
}

func (d countingDoer) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".GetItem") {
		d.count.gets.Add(1)
	} else {
		d.count.puts.Add(1)
	}
	return d.c.Do(req)
}
