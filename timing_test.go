package tenure

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/election"
)

// Every timing setting of election.Timing stands in Config, with its type,
// and converts both ways; LockerConfig has all but the standby's, and
// WatchConfig the reader's. A setting added to Timing and forgotten here
// would be dropped without a word by the conversion by name.
func TestTimingFieldsEverywhere(t *testing.T) {
	want := election.Timing{
		LeaseDuration: 30 * time.Second, RenewInterval: 3 * time.Second, PollInterval: 4 * time.Second,
		OpTimeout: 5 * time.Second, RetryMin: 6 * time.Millisecond, RetryMax: 7 * time.Second,
		MaxDrift: 0.002, Margin: 8 * time.Second, ReleaseTimeout: 9 * time.Second, ColdPollInterval: 10 * time.Second,
	}
	tt := reflect.TypeFor[election.Timing]()
	for i := range tt.NumField() {
		if reflect.ValueOf(want).Field(i).IsZero() {
			t.Fatalf("the test leaves Timing.%s zero: give it a value", tt.Field(i).Name)
		}
	}
	for _, c := range []struct {
		cfg     any
		without []string
	}{
		{&Config{}, nil},
		{&LockerConfig{}, []string{"ColdPollInterval"}},
		{&WatchConfig{}, []string{"LeaseDuration", "RenewInterval", "RetryMin", "RetryMax", "Margin", "ReleaseTimeout", "ColdPollInterval"}},
	} {
		ct := reflect.TypeOf(c.cfg).Elem()
		for i := range tt.NumField() {
			f := tt.Field(i)
			g, ok := ct.FieldByName(f.Name)
			switch skip := slices.Contains(c.without, f.Name); {
			case !ok && !skip:
				t.Errorf("%s has no field %s", ct.Name(), f.Name)
			case ok && g.Type != f.Type:
				t.Errorf("%s.%s is a %v, Timing's a %v", ct.Name(), f.Name, g.Type, f.Type)
			}
		}
		setTiming(c.cfg, want)
		got, exp := timingOf(c.cfg), want
		for _, name := range c.without {
			reflect.ValueOf(&exp).Elem().FieldByName(name).SetZero()
		}
		if got != exp {
			t.Errorf("%s: timing %+v, want %+v", ct.Name(), got, exp)
		}
	}
}
