package tenure

import (
	"reflect"

	"github.com/tenure-go/tenure/election"
)

// The timing settings are defined once, by election.Timing: its defaults
// (WithDefaults, WithStandby) and its rules (Validate). Config and
// LockerConfig repeat its fields flat, so that their literals can set
// them, and convert by field name here, not by hand in each place.
var timingFields = func() []string {
	t := reflect.TypeFor[election.Timing]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Name
	}
	return names
}()

// timingOf returns the timing settings of the config cfg points to: the
// fields of election.Timing that it has.
func timingOf(cfg any) election.Timing {
	var t election.Timing
	copyTiming(reflect.ValueOf(&t).Elem(), reflect.ValueOf(cfg).Elem())
	return t
}

// setTiming sets the timing fields of the config cfg points to from t.
func setTiming(cfg any, t election.Timing) {
	copyTiming(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(&t).Elem())
}

func copyTiming(dst, src reflect.Value) {
	for _, name := range timingFields {
		d, s := dst.FieldByName(name), src.FieldByName(name)
		if d.IsValid() && s.IsValid() {
			d.Set(s)
		}
	}
}
