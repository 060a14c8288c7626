package main

import (
	"fmt"
	"github.com/tenure-go/tenure/internal/plan"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/groupcore"
	"github.com/tenure-go/tenure/internal/lockcore"
)

const planUsage = `usage: tenure plan [flags]

Prints what a configuration means: how long a leader leads, how long a
failover can take after a crash and after a release, what fencing changes,
how many store requests the candidates make, and what they cost a month on
DynamoDB on-demand, S3 Standard, Cloud Storage and Azure Blob at list
prices (--store picks one: a name or a store URL; PostgreSQL, etcd,
Kubernetes, Redis and NATS have no per-request price). It refuses what a
Candidate would refuse (the same election.Timing.Validate), and computes
with the same functions the Candidate and the simulator use.

examples:
  tenure plan                                   # the defaults, 3 candidates
  tenure plan --lease 3s --candidates 10        # a short lease, many replicas
  tenure plan --lease 30s --renew 10s --store s3
  tenure plan --store gs://acme-leases/tenure/  # the store a URL names
  tenure plan --lease 3s --renew 1s --poll 1s --standby --candidates 20
  tenure plan --lease 3s --renew 1s --poll 1s --standby --wake --candidates 3
  tenure plan --fair --store dynamodb           # what fair lock waiters cost
  tenure plan --slots 3 --store dynamodb        # what a semaphore's holders and waiters cost
  tenure plan --shards 64 --members 8           # what a group promises and costs
  TENURE_LEASE=20s tenure plan
`

// planCommand implements "tenure plan".
func planCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("tenure plan", planUsage, stderr)
	var t election.Timing
	fs.DurationVar(&t.LeaseDuration, "lease", election.DefaultLeaseDuration, "lease duration")
	fs.DurationVar(&t.RenewInterval, "renew", 0, "renewal interval (default lease/5)")
	fs.DurationVar(&t.PollInterval, "poll", 0, "followers' poll interval (default lease/5)")
	fs.DurationVar(&t.OpTimeout, "op-timeout", 0, "store call timeout (default lease/5)")
	fs.DurationVar(&t.Margin, "margin", 0, "safety margin at the end of a term (default lease/10)")
	fs.Float64Var(&t.MaxDrift, "drift", election.DefaultMaxDrift, "largest clock rate error between hosts (ρ)")
	standby := fs.Bool("standby", false, "with a standby: one follower polls, the others poll every --cold-poll")
	fs.DurationVar(&t.ColdPollInterval, "cold-poll", 0, "with --standby: the other followers' poll interval (default 10 × poll)")
	wake := fs.Bool("wake", false, "with --standby: candidates listen for wake-ups and renewal notices (tenure.Runtime.WakeAddr)")
	strong := fs.Bool("strong-polls", false, "price polls as strongly consistent reads (tenure.Config.StrongPolls); by default DynamoDB's are eventually consistent, at half the read units")
	candidates := fs.Int("candidates", 3, "number of candidates")
	rtt := fs.Duration("rtt", 20*time.Millisecond, "longest store round trip to assume")
	store := fs.String("store", "all", "whose cost to print: dynamodb, s3, gcs, azblob, postgres, etcd, k8s, redis, nats, all, or a store URL")
	fair := fs.Bool("fair", false, "also print what fair lock waiters cost (tenure.Fair(), tenure lock --fair): 2, 5, 10 and 50 queued behind a holder")
	slots := fs.Int("slots", 0, "also print what a semaphore of this many slots costs per holder and per waiter (tenure.Slots, tenure lock --slots); with --fair, fair waiters")
	shards := fs.Int("shards", 0, "also print what a group of this many shards promises and costs (tenure.Group, tenure run --group)")
	members := fs.Int("members", 3, "with --shards: the group's members")
	watchShards := fs.Bool("watch", false, "with --shards: members wait on the shards they would take over (GroupConfig.Watch, run --group --watch)")
	if ok, status := parseFlags(fs, args, stderr); !ok {
		return status
	}
	switch {
	case *shards < 0 || *shards > groupcore.MaxShards:
		fmt.Fprintf(stderr, "tenure plan: --shards %d: want 1 to %d\n", *shards, groupcore.MaxShards)
		return exitUsage
	case *members < 1 || *members > groupcore.MaxMembers:
		fmt.Fprintf(stderr, "tenure plan: --members %d: want 1 to %d\n", *members, groupcore.MaxMembers)
		return exitUsage
	case isSet(fs, "members") && *shards == 0:
		fmt.Fprintln(stderr, "tenure plan: --members needs --shards")
		return exitUsage
	}
	if *slots < 0 || *slots > lockcore.MaxSlots {
		fmt.Fprintf(stderr, "tenure plan: --slots %d: want 1 to %d\n", *slots, lockcore.MaxSlots)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tenure plan: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	ddb := dynamoDBOnDemand
	if !*strong {
		ddb = dynamoDBOnDemandStalePolls
	}
	prices, server, feed, restarts, ok := planPrices(*store, ddb)
	if !ok {
		fmt.Fprintf(stderr, "tenure plan: --store %q: want dynamodb, s3, gcs, azblob, postgres, etcd, k8s, redis, nats, all, or a store URL\n", *store)
		return exitUsage
	}
	switch {
	case *standby:
		t = t.WithStandby()
	case !*standby && t.ColdPollInterval != 0:
		fmt.Fprintln(stderr, "tenure plan: --cold-poll needs --standby")
		return exitUsage
	}
	if *wake && !*standby {
		fmt.Fprintln(stderr, "tenure plan: --wake needs --standby")
		return exitUsage
	}
	p, err := plan.New(t, *candidates, *rtt)
	if err != nil {
		fmt.Fprintf(stderr, "tenure plan: %s\n", bare(err))
		return exitUsage
	}
	if *wake {
		p = p.WithNotices()
	}
	if feed {
		p = p.WithFeed(restarts)
	}
	if *shards > 0 { // a group's plan: its own bounds and bill, not a single lease's
		printGroup(stdout, groupcore.NewBounds(t, *shards, *members, *rtt), *shards, *members, *watchShards, prices)
		if server != "" {
			fmt.Fprintf(stdout, "\n%s has no per-request price: the requests above are its load, each a read or a compare-and-swap of one record.\n", server)
		}
		return 0
	}
	printPlan(stdout, p, prices)
	if server != "" {
		fmt.Fprintf(stdout, "\n%s has no per-request price: the requests above are its load, each a read or a compare-and-swap of one record.\n", server)
	}
	if *fair && *slots == 0 {
		printFair(stdout, p.Timing, prices)
	}
	if *slots > 0 {
		printSlots(stdout, p.Timing, *slots, *fair, prices)
	}
	return 0
}

// planPrices returns the price lists --store names (a name, "all", or a
// store URL, by its scheme), or the server of a store without a
// per-request price, whether the store has a change feed and how often an
// hour its server ends a watch; ddb is
// DynamoDB's, as --strong-polls prices it.
func planPrices(store string, ddb priceList) (prices []priceList, server string, feed bool, restarts float64, ok bool) {
	if store == "all" {
		return []priceList{ddb, s3Standard, gcsStandard, azureHot}, "", false, 0, true
	}
	scheme, _, isURL := strings.Cut(store, ":")
	for _, s := range planStores {
		if store == s.name || isURL && slices.Contains(strings.Fields(s.schemes), scheme) {
			switch {
			case s.price == &dynamoDBOnDemand:
				return []priceList{ddb}, "", s.feed, s.restarts, true
			case s.price != nil:
				return []priceList{*s.price}, "", s.feed, s.restarts, true
			}
			return nil, s.server, s.feed, s.restarts, true
		}
	}
	return nil, "", false, 0, false
}

// printGroup prints what a group promises and costs (docs/groups.md).
func printGroup(w io.Writer, b groupcore.Bounds, k, n int, watch bool, prices []priceList) {
	t := b.Timing
	fmt.Fprintf(w, "A group of %d shards over %d members (lease %v, renew %v, poll %v):\n", k, n, t.LeaseDuration, t.RenewInterval, t.PollInterval)
	row := func(k, v string) { fmt.Fprintf(w, "  %-28s %s\n", k, v) }
	share := fmt.Sprint(k / n)
	if k%n != 0 {
		share = fmt.Sprintf("%d or %d", k/n, k/n+1)
	}
	row("shards per member", share+" at equal weights (⌊K·w/W⌋ or one more with --weight)")
	row("handover, woken", fmt.Sprintf("unowned at most %v (5 round trips) from the release to the next owner's term; the holder gives a shard up at its first beat that sees the join or leave", b.WokenHandover.Round(time.Millisecond)))
	row("handover, not woken", fmt.Sprintf("unowned at most %v (a beat, the longest poll, 2 round trips)", b.PolledHandover.Round(time.Millisecond)))
	if watch {
		row("failover after a crash", fmt.Sprintf("each shard held again at most %v after its member stopped (the lock's bound: its next owner waits on it all along)", b.WatchedCrashTakeover.Round(time.Millisecond)))
	} else {
		row("failover after a crash", fmt.Sprintf("each shard held again at most %v after its member stopped (suspected within %v, then the takeover wait, a poll; %v with --watch)", b.CrashTakeover.Round(time.Millisecond), b.Suspect.Round(time.Millisecond), b.WatchedCrashTakeover.Round(time.Millisecond)))
	}
	row("balanced", fmt.Sprintf("within %v of the last join or leave; after a crash, %v plus that", b.Balance.Round(time.Millisecond), (b.CrashTakeover+time.Duration(float64(t.LeaseDuration)*(1+t.MaxDrift))).Round(time.Millisecond)))
	watchReads := 0.0
	if watch {
		watchReads = b.WatchReadsPerHour
	}
	all := b.RenewalsPerHour + b.MemberReadsPerHour + b.MemberWritesPerHour + watchReads
	extra := ""
	if watch {
		extra = fmt.Sprintf("; watching %s reads (a read per shard per poll)", count(watchReads))
	}
	row("requests per hour", fmt.Sprintf("renewals %s (%d shards, one heartbeat loop per member); membership %s reads and %s writes (%d members; the same for any number of shards)%s; all %s",
		count(b.RenewalsPerHour), k, count(b.MemberReadsPerHour), count(b.MemberWritesPerHour), n, extra, count(all)))
	for _, pr := range prices {
		hours := pr.MonthDuration.Hours()
		month := hours * ((b.RenewalsPerHour+b.MemberWritesPerHour)*pr.WritesPerPut*pr.WritePerMil + b.MemberReadsPerHour*pr.ReadPerMil + watchReads*pr.ReadsPerPoll*pr.ReadPerMil) / 1e6 // the membership's reads are strong; the watch's are polls
		row("cost, 30 days", fmt.Sprintf("%s: $%.2f for the group ($%.2f per shard)", pr.Name, month, month/float64(k)))
	}
}

func printPlan(w io.Writer, p plan.Plan, prices []priceList) {
	t := p.Timing
	fmt.Fprintf(w, "%d candidates; lease %v, renew every %v, poll every %v, op timeout %v, margin %v, drift %g; store round trips up to %v\n\n",
		p.Candidates, t.LeaseDuration, t.RenewInterval, t.PollInterval, t.OpTimeout, t.Margin, t.MaxDrift, p.RoundTrip)
	row := func(k, v string) { fmt.Fprintf(w, "  %-28s %s\n", k, v) }
	row("lead window", fmt.Sprintf("%v after sending each renewal the store confirms, by the leader's clock", p.LeadWindow))
	row("takeover wait", fmt.Sprintf("%v of an unchanged record, by the follower's clock", p.TakeoverWait))
	if p.Feed {
		row("failover after a crash", fmt.Sprintf("at most %v after the leader's last renewal, which the store's change feed tells the followers of (the wait on a clock ρ slow; 5 round trips); median about %v; if the feed is down, at most %v (the wait and the longest poll)",
			p.NoticeFailover.Round(time.Millisecond), p.NoticeFailoverMedian.Round(time.Millisecond), p.CrashFailover.Round(time.Millisecond)))
		row("failover after a release", fmt.Sprintf("at most %v: the feed tells of the release (3 round trips: the event, the read, the takeover); if the feed is down, at most %v (the longest poll)", p.FeedHandoff.Round(time.Millisecond), p.ReleaseFailover.Round(time.Millisecond)))
	} else {
		row("failover after a crash", fmt.Sprintf("at most %v (the wait and the longest poll, PollInterval + 10%%, on a clock ρ slow; 4 round trips)", p.CrashFailover.Round(time.Millisecond)))
		row("failover after a release", fmt.Sprintf("at most %v (the longest poll on a clock ρ slow; 4 round trips); on a store with a change feed (--store etcd, postgres, k8s, redis or nats) %v", p.ReleaseFailover.Round(time.Millisecond), (3*p.RoundTrip).Round(time.Millisecond)))
	}
	row("zombie window, no fencing", "unbounded: a leader paused between its check and its write sends that write when it wakes, however late")
	row("zombie window, fencing", "none at the resource: it refuses the paused leader's token once a newer term has written")
	switch {
	case t.ColdPollInterval == 0 && p.Feed:
		row("requests per hour", fmt.Sprintf("leader %s renewals; followers none while the feed tells of renewals (each times the lease from the event, and reads only to act, or after %v without one); every candidate two watches (the lease and its standby record), %s; the standby record read only when the feed tells of a write; all %s",
			count(p.RenewalsPerHour), election.FeedSilence(t), restartsText(p.WatchRestartsPerHour), count(p.RequestsPerHour)))
		row("reads per change of leader", fmt.Sprintf("%d (each follower reads the new term once; the one that takes over reads when the feed goes quiet and before its write)", p.ReadsPerTakeover))
	case t.ColdPollInterval == 0:
		row("requests per hour", fmt.Sprintf("leader %s renewals and %s reads of the standby record (every %v, to hand over to a preferred candidate: %.1f%% more requests); each follower %s polls (mean %v); all %s",
			count(p.RenewalsPerHour), count(p.LeaderReadsPerHour), t.WithStandby().ColdPollInterval, 100*p.LeaderReadsPerHour/(p.RequestsPerHour-p.LeaderReadsPerHour), count(p.PollsPerHour), p.MeanPoll, count(p.RequestsPerHour)))
	default:
		row("failover, no standby left", fmt.Sprintf("at most %v (a cold poll to see the last record, the wait, a cold poll; 4 round trips)", p.ColdFailover.Round(time.Millisecond)))
		row("handoff, standby woken", fmt.Sprintf("at most %v with --wake (5 round trips); else as after a release", p.WakeHandoff.Round(time.Millisecond)))
		hold := election.StandbyTiming(t).LeaseDuration // tenure.Config's default PriorityHoldOff
		// A candidate with a priority listens for wake-ups by default.
		prefer := time.Duration(math.Ceil(float64(hold+2*t.ColdPollInterval)/(1-t.MaxDrift))) + 2*p.RoundTrip + p.WakeHandoff
		row("preferred leader", fmt.Sprintf("a hand-over at most once per %v (3 cold polls); a candidate of higher priority, woken (--priority listens by default), leads at most %v after it joins (the hold-off, two of the leader's reads of the standby record, the woken handoff)",
			hold, prefer.Round(time.Millisecond)))
		if p.Notices {
			row("failover, standby notified", fmt.Sprintf("at most %v after the leader's last renewal (the wait on a clock ρ slow; 5 round trips); median about %v (the wait less half a renewal interval); a crash with a renewal on its way: as after a crash",
				p.NoticeFailover.Round(time.Millisecond), p.NoticeFailoverMedian.Round(time.Millisecond)))
			// Early in a term the leader reads the standby record at each
			// renewal until it knows the address (internal/standby's Renewed).
			early := int(t.ColdPollInterval / t.RenewInterval)
			row("requests per hour", fmt.Sprintf("leader %s renewals and %s reads of the standby's record (and up to %d more in each term's first %v, one a renewal until it learns where the standby listens); the standby no reads while notices come (it times each renewal from its notice, and reads only to act, or after %v without one) and %s renewals of its record; each cold follower %s reads (every %v, the lease and the standby record); all %s",
				count(p.RenewalsPerHour), count(p.LeaderReadsPerHour), early, t.ColdPollInterval, election.FeedSilence(t), count(p.StandbyRenewalsPerHour), count(p.ColdReadsPerHour), t.ColdPollInterval, count(p.RequestsPerHour)))
		} else {
			row("requests per hour", fmt.Sprintf("leader %s renewals and %s reads of the standby's record; the standby %s polls (mean %v) and %s renewals of its record; each cold follower %s reads (every %v, the lease and the standby record); all %s",
				count(p.RenewalsPerHour), count(p.LeaderReadsPerHour), count(p.PollsPerHour), p.MeanPoll, count(p.StandbyRenewalsPerHour), count(p.ColdReadsPerHour), t.ColdPollInterval, count(p.RequestsPerHour)))
		}
	}
	for _, pr := range prices {
		leader, followers := monthlyCost(p, pr)
		fmt.Fprintf(w, "\n  %s, list prices as of %s: $%g per million %s, $%g per million %s\n",
			pr.Name, pr.Date, pr.WritePerMil, pr.WriteVerb, pr.ReadPerMil, pr.ReadVerb)
		row("cost per lease, 30 days", fmt.Sprintf("leader $%.2f + followers $%.2f = $%.2f", leader, followers, leader+followers))
	}
	if len(prices) > 0 {
		fmt.Fprint(w, "\n")
		if strings.HasPrefix(prices[0].Name, "DynamoDB") {
			fmt.Fprint(w, "A payload over 1 KB doubles DynamoDB's write units. ")
		}
		fmt.Fprintln(w, "Prices change: check the providers' pricing pages.")
	}
}

// count formats n with thousands separators, rounded.
func count(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	out := ""
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out += ","
		}
		out += string(c)
	}
	return out
}

// queueBefore is what fair waiters cost with the queue that the slot
// queue replaced (one shared record every heartbeat rewrote, half of those
// writes refused), measured on DynamoDB Local at the default timings
// (bench/locks; docs/performance.md): requests per waiter per hour.
var queueBefore = map[int]float64{2: 4650, 5: 4128, 10: 3144, 50: 2921}

// printFair prints the fair waiters' requests and cost per waiter.
func printFair(w io.Writer, t election.Timing, prices []priceList) {
	fmt.Fprintf(w, "\nFair lock waiters queued behind a holder (lease %v, poll %v), each:\n", t.LeaseDuration, t.PollInterval)
	for _, n := range []int{2, 5, 10, 50} {
		reads, writes := lockcore.WaiterRequestsPerHour(t, n)
		line := fmt.Sprintf("  %2d waiters: %6s requests/h (%s reads, %s writes)", n, count(reads+writes), count(reads), count(writes))
		if t == (election.Timing{}).WithDefaults() {
			line += fmt.Sprintf(", %.0f%% of the %s before the slot queue", 100*(reads+writes)/queueBefore[n], count(queueBefore[n]))
		}
		fmt.Fprintln(w, line)
		for _, pr := range prices {
			// Every read priced as a strong one: the slots' are.
			month := pr.MonthDuration.Hours() * (writes*pr.WritesPerPut*pr.WritePerMil + reads*pr.ReadPerMil) / 1e6
			fmt.Fprintf(w, "              %s: $%.2f a month\n", pr.Name, month)
		}
	}
	fmt.Fprintln(w, "  The head reads the lock every poll; the others read it once a lease and the slot ahead of them; each beats in its own slot (docs/locks.md, Fair waiting).")
}

// printSlots prints what a semaphore's holders and waiters cost.
func printSlots(w io.Writer, t election.Timing, n int, fair bool, prices []priceList) {
	kind := "waiters"
	if fair {
		kind = "fair waiters"
	}
	fmt.Fprintf(w, "\nA semaphore of %d slots (lease %v, renew %v, poll %v):\n", n, t.LeaseDuration, t.RenewInterval, t.PollInterval)
	month := func(pr priceList, reads, writes float64) float64 {
		return pr.MonthDuration.Hours() * (writes*pr.WritesPerPut*pr.WritePerMil + reads*pr.ReadPerMil) / 1e6 // every read priced strong
	}
	holder, _, _ := lockcore.SemRequestsPerHour(t, n, 1, fair)
	fmt.Fprintf(w, "  each holder: %s requests/h (renewals of its slot)", count(holder))
	for _, pr := range prices {
		fmt.Fprintf(w, "; %s $%.2f a month", pr.Name, month(pr, 0, holder))
	}
	fmt.Fprintln(w)
	for _, k := range []int{1, 5, 20} {
		_, reads, writes := lockcore.SemRequestsPerHour(t, n, k, fair)
		fmt.Fprintf(w, "  %2d %s, each: %s requests/h (%s reads, %s writes)", k, kind, count(reads+writes), count(reads), count(writes))
		for _, pr := range prices {
			fmt.Fprintf(w, "; %s $%.2f a month", pr.Name, month(pr, reads, writes))
		}
		fmt.Fprintln(w)
	}
	if fair {
		fmt.Fprintf(w, "  A fair waiter waits in the name's queue as a fair lock's does, and reads its %d slots every poll at the head, every %v behind it.\n", n, election.GatedPoll(t))
	} else {
		fmt.Fprintf(w, "  A waiter reads each of the %d slots every poll: the cost grows with the slots, not with the waiters.\n", n)
	}
	fmt.Fprintf(w, "  Taking a slot: %d reads (the count record and every slot, at once) and a write, besides.\n", n+1)
}

// restartsText says what a feed's watches cost beyond their start.
func restartsText(perHour float64) string {
	if perHour == 0 {
		return "held open (no request once started)"
	}
	return fmt.Sprintf("each started again about %.1f times an hour, when the server ends it", perHour)
}
