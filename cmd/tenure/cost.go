package main

import (
	"time"

	"github.com/tenure-go/tenure/internal/plan"
)

// priceList is a store's list prices in US dollars, for monthlyCost.
type priceList struct {
	Name          string  // e.g. "DynamoDB on-demand, us-east-1"
	Date          string  // when they were read off AWS's pricing pages
	WritePerMil   float64 // per million writes (DynamoDB: write request units)
	ReadPerMil    float64 // per million reads
	WritesPerPut  float64 // units one renewal costs (DynamoDB: 2 beyond 1 KB)
	ReadsPerPoll  float64 // units one poll costs
	WriteVerb     string
	ReadVerb      string
	MonthDuration time.Duration
}

// The list prices tenure plan uses: us-east-1, standard tables and
// buckets. They change: check them on AWS's pricing pages.
var (
	dynamoDBOnDemand = priceList{Name: "DynamoDB on-demand, us-east-1", Date: "November 2024",
		WritePerMil: 0.625, ReadPerMil: 0.125, WritesPerPut: 1, ReadsPerPoll: 1,
		WriteVerb: "PutItem (1 WRU)", ReadVerb: "GetItem, strongly consistent (1 RRU)", MonthDuration: 30 * 24 * time.Hour}
	// dynamoDBOnDemandStalePolls: polls are eventually consistent GetItems
	// (tenure's default on DynamoDB), half a read unit each.
	dynamoDBOnDemandStalePolls = priceList{Name: "DynamoDB on-demand, us-east-1", Date: "November 2024",
		WritePerMil: 0.625, ReadPerMil: 0.125, WritesPerPut: 1, ReadsPerPoll: 0.5,
		WriteVerb: "PutItem (1 WRU)", ReadVerb: "GetItem; polls eventually consistent (½ RRU)", MonthDuration: 30 * 24 * time.Hour}
	s3Standard = priceList{Name: "S3 Standard, us-east-1", Date: "November 2024",
		WritePerMil: 5, ReadPerMil: 0.4, WritesPerPut: 1, ReadsPerPoll: 1,
		WriteVerb: "PutObject", ReadVerb: "GetObject", MonthDuration: 30 * 24 * time.Hour}
	// GCS: an upload is a Class A operation, a read Class B; a regional
	// bucket's Standard class.
	gcsStandard = priceList{Name: "Cloud Storage Standard, a region (us-central1)", Date: "2024",
		WritePerMil: 5, ReadPerMil: 0.4, WritesPerPut: 1, ReadsPerPoll: 1,
		WriteVerb: "uploads (Class A)", ReadVerb: "reads (Class B)", MonthDuration: 30 * 24 * time.Hour}
	// Azure: a Put Blob is a write operation, a Get Blob a read; the Hot
	// tier, LRS.
	azureHot = priceList{Name: "Azure Blob Hot LRS, East US", Date: "2024",
		WritePerMil: 5.5, ReadPerMil: 0.44, WritesPerPut: 1, ReadsPerPoll: 1,
		WriteVerb: "Put Blob (write operations)", ReadVerb: "Get Blob (read operations)", MonthDuration: 30 * 24 * time.Hour}
)

// planStores are the stores tenure plan knows, by --store name: a price
// list, or none for a server whose cost does not grow with requests.
var planStores = []struct {
	name, schemes string
	price         *priceList
	server        string  // for a store without a per-request price
	feed          bool    // the store has a change feed (lease.Watcher)
	restarts      float64 // with a feed: how often an hour its server ends a watch
}{
	{"dynamodb", "dynamodb", &dynamoDBOnDemand, "", false, 0},
	{"s3", "s3", &s3Standard, "", false, 0},
	{"gcs", "gs", &gcsStandard, "", false, 0},
	{"azblob", "azblob", &azureHot, "", false, 0},
	{"postgres", "postgres postgresql", nil, "PostgreSQL", true, 0}, // LISTEN on a connection held open
	{"etcd", "etcd", nil, "etcd", true, 0},                          // a gRPC stream with no end
	// The API server ends a watch after --min-request-timeout (1800s by
	// default) times a random factor in [1, 2): 45 minutes on average.
	{"k8s", "k8s", nil, "The Kubernetes API server", true, 60.0 / 45},
	{"redis", "redis rediss", nil, "Redis", true, 0}, // SUBSCRIBE on a connection held open
	{"nats", "nats tls", nil, "NATS", true, 0},       // an ordered consumer, resumed by the client
	{"file", "file", nil, "A file store", false, 0},
}

// monthlyCost returns what one lease costs a month at pr: the leader's
// renewals and its reads of the standby's record, and
// the followers' polls (with a standby: the standby's polls, none with
// renewal notices, and renewals of its record, and the cold followers'
// reads), in US dollars.
func monthlyCost(p plan.Plan, pr priceList) (leader, followers float64) {
	hours := pr.MonthDuration.Hours()
	writes := func(perHour float64) float64 { return perHour * hours * pr.WritesPerPut * pr.WritePerMil / 1e6 }
	reads := func(perHour float64) float64 { return perHour * hours * pr.ReadsPerPoll * pr.ReadPerMil / 1e6 }
	strong := func(perHour float64) float64 { return perHour * hours * pr.ReadPerMil / 1e6 }
	// The leader reads the standby's record strongly: full read units.
	leader = writes(p.RenewalsPerHour) + strong(p.LeaderReadsPerHour)
	if p.Timing.ColdPollInterval == 0 {
		return leader, reads(float64(p.Candidates-1) * p.PollsPerHour)
	}
	if p.Candidates >= 2 {
		followers = writes(p.StandbyRenewalsPerHour)
		if !p.Notices { // with notices the standby times renewals from them: no polls
			followers += reads(p.PollsPerHour)
		}
	}
	return leader, followers + reads(float64(max(p.Candidates-2, 0))*p.ColdReadsPerHour)
}
