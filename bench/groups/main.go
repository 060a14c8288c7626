// Command groups measures a tenure.Group against a real store: K shards
// over members that join one at a time (1 → 8) and then leave gracefully
// (8 → 3). After each change it prints how long until the group was
// balanced (every member holding ⌊K/N⌋ or ⌈K/N⌉), how many shards moved,
// and, for each shard handed over, how long it stayed unowned between its
// release and its next owner's term; then the store requests per hour of
// the last membership, counted over a window, beside the formula's.
//
//	scripts/testservers.sh run -- go run ./bench/groups            # DynamoDB Local
//	go run ./bench/groups -store 'dynamodb://leases?region=eu-west-1'
//	scripts/testservers.sh run -- go run ./bench/groups -wake none  # found at polls, not woken
//
// The members share this process (each its own Group, its own store
// client calls and its own UDP listener on 127.0.0.1), so that the
// moments compared come from one clock.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/benchkit"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/lease/storeurl"
)

func main() {
	var (
		storeURL = flag.String("store", "", "store URL (default: DynamoDB Local at $TENURE_DYNAMODB_ENDPOINT, else a file store)")
		shards   = flag.Int("shards", 64, "shards")
		most     = flag.Int("members", 8, "members at the most")
		least    = flag.Int("down-to", 3, "members left at the end")
		leaseDur = flag.Duration("lease", 10*time.Second, "each shard's lease")
		window   = flag.Duration("window", 30*time.Second, "how long to count requests at the end")
		wake     = flag.String("wake", "127.0.0.1:0", "the members' WakeAddr (none: no wake-ups)")
		verbose  = flag.Bool("v", false, "log every member's events on stderr")
	)
	flag.Parse()
	url, done, err := benchkit.StoreURL(*storeURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "groups:", err)
		os.Exit(1)
	}
	defer done()
	st, err := storeurl.Open(context.Background(), url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "groups:", err)
		os.Exit(1)
	}
	wrapped, store := benchkit.Count(st)
	var logger *slog.Logger
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b := &bench{k: *shards, released: map[int]time.Time{}, holder: map[int]string{}}
	fmt.Printf("%d shards, lease %v, store %s, wake %s\n\n", *shards, *leaseDur, url, *wake)
	fmt.Println("change        members  balanced after  moved  unowned per handover (min / median / max)")
	type member struct {
		g    *tenure.Group
		stop context.CancelFunc
		done chan error
	}
	var members []*member
	change := func(what string, f func()) {
		b.mark()
		start := time.Now()
		f()
		n := len(members)
		for !b.balanced(n) {
			time.Sleep(5 * time.Millisecond)
			if time.Since(start) > 5**leaseDur {
				fmt.Fprintf(os.Stderr, "groups: not balanced %v after %s\n", time.Since(start), what)
				os.Exit(1)
			}
		}
		took := time.Since(start)
		moved, gaps := b.since()
		fmt.Printf("%-13s %7d  %14v  %5d  %s\n", what, n, took.Round(time.Millisecond), moved, summary(gaps))
	}
	for i := range *most {
		id := fmt.Sprintf("m%d", i)
		change("join "+id, func() {
			g, err := tenure.NewGroup(tenure.GroupConfig{Store: wrapped, Name: "bench", Shards: *shards, Runtime: tenure.Runtime{ID: id, WakeAddr: *wake, Logger: logger}, Timing: tenure.Timing{LeaseDuration: *leaseDur},
				OnAssigned: func(ctx context.Context, s tenure.Shard) { b.assigned(id, s.ID) },
				OnRevoked:  func(s tenure.Shard, _ tenure.DemotionReason) { b.revoked(id, s.ID) },
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, "groups:", err)
				os.Exit(1)
			}
			ctx, stop := context.WithCancel(context.Background())
			m := &member{g: g, stop: stop, done: make(chan error, 1)}
			go func() { m.done <- g.Run(ctx) }()
			members = append(members, m)
		})
	}
	for len(members) > *least {
		m := members[0]
		change("leave "+m.g.ID(), func() {
			m.stop()
			if err := <-m.done; err != nil {
				fmt.Fprintln(os.Stderr, "groups:", err)
				os.Exit(1)
			}
			members = members[1:]
		})
	}
	gets, puts := store.Gets.Load(), store.Puts.Load()
	time.Sleep(*window)
	gets, puts = store.Gets.Load()-gets, store.Puts.Load()-puts
	perHour := func(n int64) float64 { return float64(n) * float64(time.Hour) / float64(*window) }
	bounds := groupcore.NewBounds(election.Timing{LeaseDuration: *leaseDur}, *shards, len(members), 0)
	fmt.Printf("\nrequests per hour, %d members, counted over %v: %.0f reads, %.0f writes, %.0f in all; the formula: %.0f renewals + %.0f membership reads + %.0f membership writes = %.0f\n",
		len(members), *window, perHour(gets), perHour(puts), perHour(gets+puts),
		bounds.RenewalsPerHour, bounds.MemberReadsPerHour, bounds.MemberWritesPerHour, bounds.RenewalsPerHour+bounds.MemberReadsPerHour+bounds.MemberWritesPerHour)
	for _, m := range members {
		m.stop()
		<-m.done
	}
}

// bench follows the shards' terms.
type bench struct {
	k        int
	mu       sync.Mutex
	holder   map[int]string    // shard: member whose term runs
	released map[int]time.Time // shard: its last release, not yet taken
	moved    int
	gaps     []time.Duration
}

func (b *bench) assigned(id string, shard int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.holder[shard] = id
	b.moved++
	if at, ok := b.released[shard]; ok {
		b.gaps = append(b.gaps, time.Since(at))
		delete(b.released, shard)
	}
}

// revoked: OnRevoked comes just before the release.
func (b *bench) revoked(id string, shard int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holder[shard] == id {
		delete(b.holder, shard)
	}
	b.released[shard] = time.Now()
}

func (b *bench) mark() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.moved, b.gaps = 0, nil
}

func (b *bench) since() (int, []time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.moved, slices.Clone(b.gaps)
}

// balanced reports whether every shard is held, by n members holding
// ⌊K/N⌋ or ⌈K/N⌉ each.
func (b *bench) balanced(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.holder) != b.k {
		return false
	}
	count := map[string]int{}
	for _, id := range b.holder {
		count[id]++
	}
	if len(count) != n {
		return false
	}
	for _, c := range count {
		if c != b.k/n && c != (b.k+n-1)/n {
			return false
		}
	}
	return true
}

func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	r := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
	return fmt.Sprintf("%s / %s / %s", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
}
