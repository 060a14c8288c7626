// Package benchkit is what the benchmark programs under bench/ share: the
// store they run on, and a store wrapper that counts its calls.
package benchkit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/storeurl"
)

// StoreURL returns the store a benchmark runs on: url if given, else a new
// table on DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT, else a file store
// in a temporary directory, which done removes. It opens the store once
// (creating the table), and returns a URL that does not create it again,
// for the benchmark's other processes.
func StoreURL(url string) (_ string, done func(), err error) {
	done = func() {}
	if url == "" {
		if ep := os.Getenv("TENURE_DYNAMODB_ENDPOINT"); ep != "" {
			if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
				os.Setenv("AWS_ACCESS_KEY_ID", "bench")
				os.Setenv("AWS_SECRET_ACCESS_KEY", "bench")
			}
			url = fmt.Sprintf("dynamodb://tenure-bench-%d?region=us-east-1&endpoint=%s&create=true", rand.Uint32(), ep)
		} else {
			dir, err := os.MkdirTemp("", "tenure-bench")
			if err != nil {
				return "", done, err
			}
			done = func() { os.RemoveAll(dir) }
			url = "file://" + filepath.ToSlash(dir)
		}
	}
	if _, err := storeurl.Open(context.Background(), url); err != nil { // creates the table once
		done()
		return "", func() {}, err
	}
	return strings.Replace(url, "&create=true", "", 1), done, nil
}

// Count wraps s to count its calls: the store to hand on, which keeps s's
// change feed if it has one (lease.Watcher), and its counts.
func Count(s lease.Store) (lease.Store, *Counting) {
	c := &Counting{Store: s}
	if w, ok := s.(lease.Watcher); ok {
		return countingWatcher{c, w}, c
	}
	return c, c
}

// countingWatcher is Counting that passes the feed on.
type countingWatcher struct {
	*Counting
	w lease.Watcher
}

func (c countingWatcher) Watch(ctx context.Context, name string, fn func(lease.Event)) error {
	return c.w.Watch(ctx, name, fn)
}

// Counting counts the calls that reach a store, and the writes refused.
type Counting struct {
	lease.Store
	Gets, Puts, Conflicts atomic.Int64
}

func (c *Counting) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	c.Gets.Add(1)
	return c.Store.Get(ctx, name)
}

// GetStale passes on the store's cheaper read where it has one, so that
// followers poll as they would on it unwrapped.
func (c *Counting) GetStale(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	c.Gets.Add(1)
	if sg, ok := c.Store.(lease.StaleGetter); ok {
		return sg.GetStale(ctx, name)
	}
	return c.Store.Get(ctx, name)
}

func (c *Counting) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	c.Puts.Add(1)
	v, err := c.Store.Put(ctx, name, rec, expect)
	if errors.Is(err, lease.ErrConflict) {
		c.Conflicts.Add(1)
	}
	return v, err
}

// Quantiles returns "min A  median B  p90 C  p99 D  max E  (N trials)" of
// ds, each figure as f writes it; "" for none.
func Quantiles(ds []time.Duration, f func(time.Duration) string) string {
	if len(ds) == 0 {
		return ""
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("min %s  median %s  p90 %s  p99 %s  max %s  (%d trials)", f(s[0]), f(q(0.5)), f(q(0.9)), f(q(0.99)), f(s[len(s)-1]), len(s))
}
