package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/plan"
)

func TestPlan(t *testing.T) {
	code, out, errs := runTenure(t, "plan", "--candidates", "3")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, s := range []string{"lead window                  8.99s", "at most 12.302s", "at most 2.282s", "all 5,580",
		"180 reads of the standby record (every 20s, to hand over to a preferred candidate: 3.3% more requests)",
		"leader $0.83 + followers $0.16 = $0.99", "leader $6.53 + followers $1.04 = $7.57", "as of November 2024"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestPlanRefuses: what a Candidate refuses, plan refuses, with the field.
func TestPlanRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--lease", "1s", "--margin", "2s"}, "Margin 2s leaves no lead window"},
		{[]string{"plan", "--renew", "9s"}, "RenewInterval"},
		{[]string{"plan", "--candidates", "0"}, "at least 1"},
		{[]string{"plan", "--store", "memcached"}, "--store"},
		{[]string{"plan", "extra"}, "unexpected argument"},
		{[]string{"plan", "--members", "4"}, "--members needs --shards"},
		{[]string{"plan", "--shards", "5000"}, "--shards 5000"},
		{[]string{"plan", "--shards", "8", "--members", "41"}, "--members 41"},
	} {
		if code, _, errs := runTenure(t, c.args...); code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errs, exitUsage, c.want)
		}
	}
}

func TestPlanFromEnvironment(t *testing.T) {
	t.Setenv("TENURE_LEASE", "3s")
	t.Setenv("TENURE_CANDIDATES", "10")
	code, out, errs := runTenure(t, "plan", "--store", "dynamodb")
	if code != 0 || !strings.Contains(out, "10 candidates; lease 3s") || strings.Contains(out, "S3") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runTenure(t, "plan", "--lease", "x"); code != exitUsage || errs == "" {
		t.Fatalf("--lease x: exit %d", code)
	}
	if code, _, errs := runTenure(t, "plan", "-h"); code != 0 || !strings.Contains(errs, "examples:") {
		t.Fatalf("-h: exit %d, %q", code, errs)
	}
	t.Setenv("TENURE_LEASE", "soon")
	if code, _, errs := runTenure(t, "plan"); code != exitUsage || !strings.Contains(errs, `TENURE_LEASE="soon" (--lease)`) {
		t.Fatalf("TENURE_LEASE=soon: exit %d, %q", code, errs)
	}
}

// TestPlanStandby: with --standby the requests grow by a cold follower's
// reads per candidate; --cold-poll alone is refused.
func TestPlanStandby(t *testing.T) {
	code, out, errs := runTenure(t, "plan", "--lease", "3s", "--renew", "1s", "--poll", "1s", "--standby", "--candidates", "10")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, s := range []string{"the standby 3,600 polls", "360 renewals of its record", "each cold follower 720 reads (every 10s", "360 reads of the standby's record", "all 13,680", "failover, no standby left", "a hand-over at most once per 30s"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if code, _, errs := runTenure(t, "plan", "--cold-poll", "20s"); code != exitUsage || !strings.Contains(errs, "--standby") {
		t.Errorf("--cold-poll without --standby: exit %d, %s", code, errs)
	}
	if code, _, errs := runTenure(t, "plan", "--wake"); code != exitUsage || !strings.Contains(errs, "--standby") {
		t.Errorf("--wake without --standby: exit %d, %s", code, errs)
	}
}

// TestPlanWake: --wake adds the failover after a noticed renewal, and
// prices no polls for the standby, which times renewals from their
// notices; the leader reads the standby record once a cold poll.
func TestPlanWake(t *testing.T) {
	code, out, errs := runTenure(t, "plan", "--lease", "3s", "--renew", "1s", "--poll", "1s", "--standby", "--wake", "--candidates", "10", "--store", "dynamodb")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, s := range []string{"360 reads of the standby's record (and up to 10 more in each term's first 10s", "the standby no reads while notices come", "all 10,080", "failover, standby notified", "at most 3.106s", "median about 2.563s"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	tm := election.Timing{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, PollInterval: time.Second, ColdPollInterval: 10 * time.Second}
	p, _ := plan.New(tm, 3, 20*time.Millisecond)
	leader, followers := monthlyCost(p.WithNotices(), dynamoDBOnDemandStalePolls)
	// 720 h: leader 3,600 writes/h + 360 strong reads/h; followers 360 writes/h, 720 half-unit reads/h.
	if math.Abs(leader-720*(3600*0.625+360*0.125)/1e6) > 1e-9 || math.Abs(followers-720*(360*0.625+720*0.0625)/1e6) > 1e-9 {
		t.Errorf("cost: leader %v, followers %v", leader, followers)
	}
}

// TestPlanStrongPolls: --strong-polls prices DynamoDB polls as strongly
// consistent reads, a full read unit each.
func TestPlanStrongPolls(t *testing.T) {
	code, out, errs := runTenure(t, "plan", "--strong-polls", "--store", "dynamodb")
	if code != 0 || !strings.Contains(out, "leader $0.83 + followers $0.32 = $1.15") || !strings.Contains(out, "strongly consistent (1 RRU)") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// TestMonthlyCost: the arithmetic tenure plan prints, with and without a
// standby.
func TestMonthlyCost(t *testing.T) {
	p, err := plan.New(election.Timing{}, 3, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	leader, followers := monthlyCost(p, dynamoDBOnDemand)
	// 1,800/h × 720 h = 1,296,000 WRU at $0.625/M, and 180/h strong reads of
	// the standby record, 129,600 RRU at $0.125/M; 2 × 1,800/h × 720 h =
	// 2,592,000 RRU at $0.125/M.
	if math.Abs(leader-0.8262) > 1e-9 || math.Abs(followers-0.324) > 1e-9 {
		t.Fatalf("DynamoDB cost: leader %v, followers %v", leader, followers)
	}
	tm := election.Timing{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, PollInterval: time.Second, ColdPollInterval: 10 * time.Second}
	p, err = plan.New(tm, 3, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	leader, followers = monthlyCost(p, dynamoDBOnDemand)
	// 720 h: leader 3,600 writes/h + 360 reads/h of the standby record; followers 360 writes/h + (3,600 + 720) reads/h.
	if math.Abs(leader-720*(3600*0.625+360*0.125)/1e6) > 1e-9 || math.Abs(followers-720*(360*0.625+4320*0.125)/1e6) > 1e-9 {
		t.Errorf("cost: leader %v, followers %v", leader, followers)
	}
}

// TestPlanFair: --fair prints the fair waiters' requests per waiter per
// hour (what the slot queue's cadences add up to, checked against counted
// requests in internal/lockcore) beside the queue's before, and their cost.
func TestPlanFair(t *testing.T) {
	code, out, errs := runTenure(t, "plan", "--fair", "--store", "dynamodb")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, s := range []string{"10 waiters:  1,465 requests/h", "47% of the 3,144 before", "50 waiters:", "$0.24 a month"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if code, out, _ := runTenure(t, "plan"); code != 0 || strings.Contains(out, "waiters") {
		t.Errorf("plan without --fair prints the fair waiters:\n%s", out)
	}
}

// What a group costs: the renewals of its shards, and a membership that
// costs the same for any number of shards.
func TestPlanGroup(t *testing.T) {
	code, out, errs := runTenure(t, "plan", "--shards", "64", "--members", "8", "--store", "dynamodb")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, s := range []string{"64 shards over 8 members", "shards per member            8 at", "renewals 115,200 (64 shards", "membership 14,400 reads and 14,400 writes", "all 144,000", "$59.62 for the group"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if !strings.HasPrefix(out, "A group of 64 shards") || strings.Contains(out, "candidates; lease") {
		t.Errorf("a group's plan opens with another's:\n%s", out)
	}
	_, watched, _ := runTenure(t, "plan", "--shards", "64", "--members", "8", "--store", "dynamodb", "--watch")
	for _, s := range []string{"at most 12.302s after its member stopped (the lock's bound", "watching 115,200 reads", "all 259,200", "$64.80 for the group"} {
		if !strings.Contains(watched, s) {
			t.Errorf("--watch: output lacks %q:\n%s", s, watched)
		}
	}
	_, more, _ := runTenure(t, "plan", "--shards", "640", "--members", "8", "--store", "dynamodb")
	if !strings.Contains(more, "membership 14,400 reads and 14,400 writes") {
		t.Errorf("the membership's cost grows with the shards:\n%s", more)
	}
}

// TestPlanStores: --store takes each store's name or a URL of it, and
// prints its price list, or says that it has none.
func TestPlanStores(t *testing.T) {
	for _, c := range []struct{ store, want, not string }{
		{"gcs", "Cloud Storage Standard", "DynamoDB"},
		{"gs://acme/tenure/", "Cloud Storage Standard", "Azure"},
		{"azblob", "Azure Blob Hot LRS", "S3"},
		{"azblob://acct/leases/", "Azure Blob Hot LRS", "Cloud Storage"},
		{"postgres", "PostgreSQL has no per-request price", "cost per lease"},
		{"postgresql://db.internal/app", "PostgreSQL has no per-request price", "cost per lease"},
		{"etcd://10.0.0.1:2379/tenure/", "etcd has no per-request price", "cost per lease"},
		{"k8s://jobs?context=prod", "The Kubernetes API server has no per-request price", "cost per lease"},
		{"k8s", "The Kubernetes API server has no per-request price", "cost per lease"},
		{"redis://cache:6379/0?prefix=jobs:", "Redis has no per-request price", "cost per lease"},
		{"nats://10.0.0.1:4222/leases", "NATS has no per-request price", "cost per lease"},
		{"nats", "followers none while the feed tells of renewals", "cost per lease"},
		{"all", "Azure Blob Hot LRS", "no per-request price"},
	} {
		code, out, errs := runTenure(t, "plan", "--store", c.store)
		if code != 0 || !strings.Contains(out, c.want) || strings.Contains(out, c.not) {
			t.Errorf("--store %s: exit %d, want %q and no %q:\n%s%s", c.store, code, c.want, c.not, out, errs)
		}
	}
	if code, _, errs := runTenure(t, "plan", "--store", "memcached://x"); code != exitUsage || !strings.Contains(errs, "a store URL") {
		t.Errorf("--store memcached://x: exit %d, %s", code, errs)
	}
}
