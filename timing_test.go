package tenure

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/lease/memlease"
)

// Timing and Runtime are declared once and embedded: each config checks
// them by the same rules, and names the field at fault. A ColdPollInterval
// is a Candidate's standby's: elsewhere it is refused, not ignored.
func TestConfigsShareTimingRules(t *testing.T) {
	store := memlease.New()
	bad := Timing{LeaseDuration: time.Second, RenewInterval: 2 * time.Second}
	cold := Timing{ColdPollInterval: time.Minute}
	onShard := func(context.Context, Shard) {}
	for _, c := range []struct {
		name  string
		check func(Timing) error
		cold  bool // ColdPollInterval allowed
	}{
		{"Config", func(tm Timing) error { return Config{Lease: "a", Store: store, Timing: tm, Standby: true}.Validate() }, true},
		{"LockerConfig", func(tm Timing) error { return LockerConfig{Store: store, Timing: tm}.Validate() }, false},
		{"GroupConfig", func(tm Timing) error {
			return GroupConfig{Store: store, Name: "g", Shards: 2, OnAssigned: onShard, Timing: tm}.Validate()
		}, false},
	} {
		var fe *election.FieldError
		if err := c.check(bad); !errors.As(err, &fe) || fe.Field != "RenewInterval" {
			t.Errorf("%s with RenewInterval > LeaseDuration: %v, want a FieldError on RenewInterval", c.name, err)
		}
		if err := c.check(Timing{}); err != nil {
			t.Errorf("%s with the default timing: %v", c.name, err)
		}
		err := c.check(cold)
		switch {
		case c.cold && err != nil:
			t.Errorf("%s with ColdPollInterval: %v", c.name, err)
		case !c.cold && (!errors.As(err, &fe) || fe.Field != "ColdPollInterval"):
			t.Errorf("%s with ColdPollInterval: %v, want a FieldError on ColdPollInterval", c.name, err)
		}
	}
	if err := (WatchConfig{Lease: "a", Store: store, Timing: Timing{PollInterval: -1}}).Validate(); err == nil {
		t.Error("WatchConfig with a negative PollInterval: no error")
	}
}
