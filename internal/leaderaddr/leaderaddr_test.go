package leaderaddr

import (
	"bytes"
	"testing"
)

func TestJoinSplit(t *testing.T) {
	for _, c := range []struct {
		addr    string
		payload []byte
	}{
		{"", nil},
		{"", []byte("plain")},
		{"10.0.0.7:8080", nil},
		{"10.0.0.7:8080", []byte("with\na newline")},
		{"leader.example:443", []byte{0}},
	} {
		addr, payload := Split(Join(c.addr, c.payload))
		if addr != c.addr || !bytes.Equal(payload, c.payload) {
			t.Errorf("%q %q: split %q %q", c.addr, c.payload, addr, payload)
		}
	}
	// A payload that only looks like ours is left alone.
	if addr, p := Split([]byte("\xfftenure.addr=no newline")); addr != "" || string(p) != "\xfftenure.addr=no newline" {
		t.Errorf("split %q %q", addr, p)
	}
}

func TestCheck(t *testing.T) {
	for _, bad := range []string{"nohost", ":8080", "0.0.0.0:80", "[::]:80", "a\n:80"} {
		if Check(bad, nil) == nil {
			t.Errorf("%q passed", bad)
		}
	}
	if Check("", []byte{0xff}) == nil {
		t.Error("a payload beginning with 0xff passed")
	}
	for _, good := range []string{"", "10.0.0.7:8080", "leader.example:443", "[fd00::1]:80"} {
		if err := Check(good, []byte("x")); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}
