// Command singlewriter shows fencing stop a zombie leader. Two replicas of a
// service campaign for one lease; only the leader writes to a resource, and
// every write carries the leader's fencing token. Partway through, the
// leader freezes (a stop-the-world pause, simulated: its writer goroutine
// stops just after checking that it still leads, and its renewals stop
// reaching the store). Its lease runs out, the other replica takes over and
// writes. Then the frozen leader wakes and sends the write it was about to
// send: the resource refuses it, because a newer token has written since.
//
// By default everything runs in one process, on the in-memory lease store,
// with a resource protected by a fencing.Guard, so it needs no setup:
//
//	go run ./examples/singlewriter
//
// The resource can instead be an item in a DynamoDB table or an object in an
// S3 bucket, fenced by fencing/dynamofence or fencing/s3fence (the leases
// stay in memory):
//
//	go run ./examples/singlewriter -resource dynamodb -table singlewriter -region eu-west-1
//	go run ./examples/singlewriter -resource dynamodb -table singlewriter -endpoint http://127.0.0.1:8000
//	go run ./examples/singlewriter -resource s3 -bucket my-bucket -endpoint http://127.0.0.1:9000
//
// Credentials come from the usual AWS sources; with -endpoint, set
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the server's keys (DynamoDB
// Local accepts any). The table is created (on demand, key "id" of type S)
// if it is missing; the bucket must exist.
//
// It exits 0 when the late write was refused and the resource holds the new
// leader's write, and 1 otherwise. -unfenced (memory resource only) turns the
// check off to show the late write landing: it then exits 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/memlease"
)

func main() {
	var (
		kind     = flag.String("resource", "memory", "what the leader writes: memory, dynamodb or s3")
		table    = flag.String("table", "tenure-singlewriter", "DynamoDB table (with -resource dynamodb)")
		bucket   = flag.String("bucket", "", "S3 bucket (with -resource s3)")
		key      = flag.String("key", "singlewriter/state", "item id or object key written")
		region   = flag.String("region", "", "AWS region (default: from the AWS config, else us-east-1)")
		endpoint = flag.String("endpoint", "", "endpoint URL of a compatible server, e.g. http://127.0.0.1:8000")
		unfenced = flag.Bool("unfenced", false, "memory resource without the fence check, to see the late write land")
		leaseFor = flag.Duration("lease", 2*time.Second, "lease duration")
		every    = flag.Duration("every", 300*time.Millisecond, "write interval of the leader")
		timeout  = flag.Duration("timeout", time.Minute, "give up after this long")
	)
	flag.Parse()
	if *leaseFor <= 0 || *every <= 0 || *every > *leaseFor/4 {
		fmt.Fprintln(os.Stderr, "singlewriter: -lease and -every must be positive, and -every at most a quarter of -lease")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var res resource
	var err error
	switch *kind {
	case "memory":
		res = &memResource{unfenced: *unfenced}
	case "dynamodb":
		res, err = openDynamoDB(ctx, *table, *key, *region, *endpoint)
	case "s3":
		res, err = openS3(ctx, *bucket, *key, *region, *endpoint)
	default:
		err = fmt.Errorf("-resource %q: want memory, dynamodb or s3", *kind)
	}
	if err == nil && *unfenced && *kind != "memory" {
		err = errors.New("-unfenced works with -resource memory only")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "singlewriter:", err)
		os.Exit(2)
	}
	o, err := run(ctx, os.Stdout, options{lease: *leaseFor, every: *every}, res)
	if err != nil {
		fmt.Fprintln(os.Stderr, "singlewriter:", err)
		os.Exit(1)
	}
	if !o.ok() {
		os.Exit(1)
	}
}

// resource is what the leader writes: one value, stored with the fence of the
// write that stored it. Write takes the writer's fence from ctx, as a remote
// service takes it from the request.
type resource interface {
	Write(ctx context.Context, value string) error
	Read(ctx context.Context) (value string, f fencing.Fence, err error)
	String() string
}

// memResource is a resource in this process, protected by a Guard.
type memResource struct {
	unfenced bool
	guard    fencing.Guard

	mu    sync.Mutex // guards value and fence
	value string
	fence fencing.Fence
}

func (m *memResource) Write(ctx context.Context, value string) error {
	f, ok := fencing.FromContext(ctx)
	if !ok {
		return fencing.ErrNoFence
	}
	set := func() error {
		m.mu.Lock()
		m.value, m.fence = value, f
		m.mu.Unlock()
		return nil
	}
	if m.unfenced {
		return set()
	}
	return m.guard.Do(f.Lease, f.Token, set)
}

func (m *memResource) Read(context.Context) (string, fencing.Fence, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value, m.fence, nil
}

func (m *memResource) String() string {
	if m.unfenced {
		return "an in-memory resource WITHOUT a fence check"
	}
	return "an in-memory resource behind a fencing.Guard"
}

type options struct {
	lease time.Duration // lease duration
	every time.Duration // time between the leader's writes
}

// outcome is what the run saw.
type outcome struct {
	lateErr    error         // what the zombie's late write got
	final      string        // the resource's value at the end
	finalFence fencing.Fence // its fence
	newLeader  string        // the replica that took over
	newFence   fencing.Fence // its fence
}

// ok reports whether the resource refused the late write and kept the new
// leader's.
func (o outcome) ok() bool {
	return errors.Is(o.lateErr, fencing.ErrStaleToken) && o.finalFence == o.newFence && strings.HasPrefix(o.final, o.newLeader+" ")
}

// replica is one candidate, with the switches that freeze it.
type replica struct {
	id     string
	cut    atomic.Bool   // its store calls fail, as if it were frozen
	frozen atomic.Bool   // its writer stops before its next write
	paused chan string   // the write it stopped before
	wake   chan struct{} // closed to wake it
	late   chan error    // what its late write got
	done   chan error    // Run's result
}

// cutStore stands between a replica and the store; while the replica is
// frozen nothing it sends arrives, so its lease runs out.
type cutStore struct {
	lease.Store
	r *replica
}

var errFrozen = errors.New("process frozen")

func (s cutStore) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if s.r.cut.Load() {
		return lease.Record{}, lease.NoVersion, errFrozen
	}
	return s.Store.Get(ctx, name)
}

func (s cutStore) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if s.r.cut.Load() {
		return lease.NoVersion, errFrozen
	}
	return s.Store.Put(ctx, name, rec, expect)
}

// demo is one run.
type demo struct {
	mu    sync.Mutex // guards w: replicas and run print concurrently
	w     io.Writer
	start time.Time
	res   resource
	every time.Duration
	// clk times the leader's writes: clock.New(), or a simulated node's in
	// main_test.go.
	clk tenure.Clock

	elected chan electedEvent // each election
	written chan string       // each accepted write, by replica id
	failed  chan error        // the first write that failed for another reason than the fence
}

type electedEvent struct {
	id   string
	term tenure.Term
}

func (d *demo) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "%6.2fs  %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// run plays the scenario and reports what happened.
func run(ctx context.Context, w io.Writer, o options, res resource) (outcome, error) {
	d := &demo{w: w, start: time.Now(), res: res, every: o.every, clk: clock.New(),
		elected: make(chan electedEvent, 4), written: make(chan string, 64), failed: make(chan error, 1)}
	store := memlease.New()
	ctx, stopAll := context.WithCancel(ctx)
	replicas := map[string]*replica{}
	var wg sync.WaitGroup
	defer func() {
		stopAll()
		wg.Wait()
	}()
	startReplica := func(id string) (*replica, error) {
		r := &replica{id: id, paused: make(chan string, 1), wake: make(chan struct{}), late: make(chan error, 1), done: make(chan error, 1)}
		c, err := tenure.New(tenure.Config{
			Lease:     "examples/singlewriter",
			Runtime:   tenure.Runtime{ID: id},
			Store:     cutStore{Store: store, r: r},
			Timing:    tenure.Timing{LeaseDuration: o.lease},
			Callbacks: d.callbacks(r),
		})
		if err != nil {
			return nil, err
		}
		replicas[id] = r
		wg.Go(func() { r.done <- c.Run(ctx) })
		return r, nil
	}

	d.printf("writing to %s; lease %v", res, o.lease)
	first, err := startReplica("node-1")
	if err != nil {
		return outcome{}, err
	}
	if _, err := d.waitElected(ctx, first.id); err != nil {
		return outcome{}, err
	}
	// The second replica starts once the first leads, so that the story
	// is always told the same way round.
	second, err := startReplica("node-2")
	if err != nil {
		return outcome{}, err
	}
	if err := d.waitWrites(ctx, first.id, 3); err != nil {
		return outcome{}, err
	}

	first.frozen.Store(true)
	first.cut.Store(true)
	var pending string
	select {
	case pending = <-first.paused:
	case <-ctx.Done():
		return outcome{}, fmt.Errorf("waiting for %s to freeze: %w", first.id, ctx.Err())
	}
	frozeAt := time.Now()
	d.printf("%s FREEZES (a long GC pause) just after checking that it still leads, before sending %q", first.id, pending)

	ev, err := d.waitElected(ctx, second.id)
	if err != nil {
		return outcome{}, err
	}
	if err := d.waitWrites(ctx, second.id, 2); err != nil {
		return outcome{}, err
	}

	d.printf("%s wakes after %.1fs, unaware that its term is over, and sends its late write", first.id, time.Since(frozeAt).Seconds())
	first.cut.Store(false)
	close(first.wake)
	var out outcome
	select {
	case out.lateErr = <-first.late:
	case <-ctx.Done():
		return outcome{}, fmt.Errorf("waiting for the late write: %w", ctx.Err())
	}

	out.newLeader, out.newFence = second.id, ev.term.Fence()
	if out.final, out.finalFence, err = res.Read(ctx); err != nil {
		return outcome{}, fmt.Errorf("read the resource: %w", err)
	}
	if out.ok() {
		d.printf("resource holds %q (%v): intact", out.final, out.finalFence)
	} else {
		d.printf("resource holds %q (%v): CORRUPTED, want a write of %s under %v", out.final, out.finalFence, out.newLeader, out.newFence)
	}

	stopAll()
	for _, r := range replicas {
		if err := <-r.done; err != nil {
			d.printf("%s: %v", r.id, err)
		}
	}
	d.printf("done")
	return out, nil
}

func (d *demo) waitElected(ctx context.Context, id string) (electedEvent, error) {
	for {
		select {
		case ev := <-d.elected:
			if ev.id == id {
				return ev, nil
			}
		case err := <-d.failed:
			return electedEvent{}, err
		case <-ctx.Done():
			return electedEvent{}, fmt.Errorf("waiting for %s to be elected: %w", id, ctx.Err())
		}
	}
}

func (d *demo) waitWrites(ctx context.Context, id string, n int) error {
	for n > 0 {
		select {
		case w := <-d.written:
			if w == id {
				n--
			}
		case err := <-d.failed:
			return err
		case <-ctx.Done():
			return fmt.Errorf("waiting for writes of %s: %w", id, ctx.Err())
		}
	}
	return nil
}

func (d *demo) callbacks(r *replica) tenure.Callbacks {
	return tenure.Callbacks{
		OnElected: func(ctx context.Context, term tenure.Term) {
			d.printf("%s elected, token %d", r.id, term.Token)
			select {
			case d.elected <- electedEvent{r.id, term}:
			default: // nobody waits for a later election
			}
			d.lead(ctx, r, term)
		},
		OnDemoted: func(term tenure.Term, reason tenure.DemotionReason) {
			d.printf("%s demoted, token %d (%v)", r.id, term.Token, reason)
		},
	}
}

// lead is the leader's work: write, every interval, while the term lasts.
func (d *demo) lead(ctx context.Context, r *replica, term tenure.Term) {
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			return // the term is over: the check every leader makes
		}
		value := fmt.Sprintf("%s write #%d (token %d)", r.id, n, term.Token)
		writeCtx := ctx
		if r.frozen.Load() {
			// The pause strikes here, after every check: the leader's
			// and the fenced helpers' (fencing.Err), which would see the
			// term over on waking. A pause can as well fall inside the
			// write, after those checks, with the request on its way:
			// that is the write modelled here, detached from the term
			// and carrying only its fence. Only the resource can refuse it.
			r.paused <- value
			<-r.wake
			writeCtx = fencing.NewContext(context.Background(), term.Fence())
			err := d.res.Write(writeCtx, value)
			if err != nil {
				d.printf("%s: late write REJECTED: %v", r.id, err)
			} else {
				d.printf("%s: late write ACCEPTED: the zombie overwrote the new leader's data", r.id)
			}
			r.late <- err
			return
		}
		if err := d.res.Write(writeCtx, value); err != nil {
			d.printf("%s: write failed: %v", r.id, err)
			if !errors.Is(err, fencing.ErrStaleToken) && ctx.Err() == nil {
				select {
				case d.failed <- fmt.Errorf("%s could not write to %s: %w", r.id, d.res, err):
				default:
				}
			}
		} else {
			d.printf("%s wrote %q", r.id, value)
			select {
			case d.written <- r.id:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.clk.After(d.every):
		}
	}
}
