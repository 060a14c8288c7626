package pglease

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// A notification tells the lease's name and the event, with the record's
// term where the payload carries it (every write since it was told), and
// without where an older store sent it.
func TestParseNotice(t *testing.T) {
	rec := &lease.Record{Holder: "a b", Token: 7, Duration: 10 * time.Second}
	rel := &lease.Record{Holder: "a b", Token: 7, Duration: 10 * time.Second, Released: true}
	for _, c := range []struct {
		payload, name string
		want          lease.Event
	}{
		{"W v1 7 10000000000 612062 jobs/x y", "jobs/x y", lease.Event{Version: "v1", Record: rec}},
		{"R v2 7 10000000000 612062 jobs", "jobs", lease.Event{Version: "v2", Released: true, Record: rel}},
		{"w v1 jobs/x y", "jobs/x y", lease.Event{Version: "v1"}},
		{"r v2 jobs", "jobs", lease.Event{Version: "v2", Released: true}},
		{"d - jobs", "jobs", lease.Event{}},
		{"W v3 x 10 61 jobs", "jobs", lease.Event{Version: "v3"}}, // a token that is none: no record, still a write
	} {
		name, ev, ok := parseNotice(c.payload)
		got, want := ev, c.want
		got.Record, want.Record = nil, nil
		if !ok || name != c.name || got != want || (ev.Record == nil) != (c.want.Record == nil) || ev.Record != nil && !sameTerm(*ev.Record, *c.want.Record) {
			t.Errorf("parseNotice(%q) = %q %+v %v, want %q %+v", c.payload, name, ev, ok, c.name, c.want)
		}
	}
	if _, _, ok := parseNotice("W v1 7"); ok {
		t.Error("a truncated payload parsed")
	}
}

func sameTerm(a, b lease.Record) bool {
	return a.Holder == b.Holder && a.Token == b.Token && a.Duration == b.Duration && a.Released == b.Released
}
