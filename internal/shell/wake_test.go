package shell

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/engine"
)

// A renewal notice tells its renewal, which the standby reads back; a
// plain notice, or one whose renewal cannot be read, only asks for a read;
// another lease's, even one whose name this one's begins, is none.
func TestRenewalNotice(t *testing.T) {
	r := engine.Renewal{Version: "v7", Holder: "pod a", Token: 42, Duration: 15 * time.Second}
	got, ok := ParseNotice("jobs", []byte(RenewalMsg("jobs", r)))
	if !ok || got != r {
		t.Fatalf("round trip: %+v %v, want %+v", got, ok, r)
	}
	for _, c := range []struct {
		msg    string
		notice bool
	}{
		{NoticeMsg("jobs"), true},
		{RenewalMsg("jobs", engine.Renewal{}), true},
		{NoticeMsg("jobs") + "\nv7 x 15 61", true}, // a token that is none: a read
		{RenewalMsg("jobs2", r), false},
		{NoticeMsg("jobs2"), false},
		{WakeMsg("jobs"), false},
	} {
		got, ok := ParseNotice("jobs", []byte(c.msg))
		if ok != c.notice || got != (engine.Renewal{}) {
			t.Errorf("ParseNotice(%q) = %+v %v, want a notice %v telling nothing", c.msg, got, ok, c.notice)
		}
	}
}
