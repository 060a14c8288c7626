package fencing_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/fencing"
)

func TestTokenStringParseRoundTrip(t *testing.T) {
	tests := []struct {
		tok  fencing.Token
		text string
	}{
		{1, "1"},
		{42, "42"},
		{1<<63 - 1, "9223372036854775807"},
		{^fencing.Token(0), "18446744073709551615"},
	}
	for _, tt := range tests {
		if got := tt.tok.String(); got != tt.text {
			t.Errorf("Token(%d).String() = %q, want %q", uint64(tt.tok), got, tt.text)
		}
		got, err := fencing.ParseToken(tt.text)
		if err != nil || got != tt.tok {
			t.Errorf("ParseToken(%q) = %d, %v; want %d", tt.text, uint64(got), err, uint64(tt.tok))
		}
		b, err := tt.tok.MarshalText()
		if err != nil || string(b) != tt.text {
			t.Errorf("Token(%d).MarshalText() = %q, %v; want %q", uint64(tt.tok), b, err, tt.text)
		}
		var u fencing.Token
		if err := u.UnmarshalText(b); err != nil || u != tt.tok {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %d", b, uint64(u), err, uint64(tt.tok))
		}
	}
}

func TestParseTokenRejects(t *testing.T) {
	bad := map[string]string{
		"":                     "not a decimal number",
		"0":                    "tokens start at 1",
		"00":                   "leading zero",
		"007":                  "leading zero",
		"-1":                   "not a decimal number",
		"+1":                   "not a decimal number",
		" 1":                   "not a decimal number",
		"1 ":                   "not a decimal number",
		"0x10":                 "not a decimal number",
		"1.0":                  "not a decimal number",
		"1e3":                  "not a decimal number",
		"abc":                  "not a decimal number",
		"18446744073709551616": "exceeds 2^64-1",
	}
	for in, reason := range bad {
		tok, err := fencing.ParseToken(in)
		if err == nil {
			t.Errorf("ParseToken(%q) = %d, want an error", in, uint64(tok))
			continue
		}
		if tok != 0 {
			t.Errorf("ParseToken(%q) returned token %d with its error", in, uint64(tok))
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "fencing: parse token ") || !strings.Contains(msg, reason) {
			t.Errorf("ParseToken(%q) error %q, want it to name the input and say %q", in, msg, reason)
		}
	}
}

func TestUnmarshalTextErrorKeepsValue(t *testing.T) {
	tok := fencing.Token(5)
	if err := tok.UnmarshalText([]byte("x")); err == nil {
		t.Fatal("UnmarshalText(\"x\") succeeded")
	}
	if tok != 5 {
		t.Fatalf("a failed UnmarshalText changed the token to %d", uint64(tok))
	}
}

// Tokens travel in JSON as decimal strings, which keeps them exact for
// readers that parse numbers as float64.
func TestTokenJSON(t *testing.T) {
	type msg struct {
		Token fencing.Token `json:"token"`
	}
	in := msg{Token: 1<<53 + 1}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"token":"9007199254740993"}`; got != want {
		t.Fatalf("json.Marshal = %s, want %s", got, want)
	}
	var out msg
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("json.Unmarshal(%s) = %+v, %v; want %+v", b, out, err, in)
	}
	// An unset token survives a round trip; ParseToken alone refuses it.
	if err := json.Unmarshal([]byte(`{"token":"0"}`), &out); err != nil || out.Token != 0 {
		t.Fatalf(`json.Unmarshal of token "0" = %+v, %v; want the zero token`, out, err)
	}
}
