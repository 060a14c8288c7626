package fencing

import (
	"errors"
	"fmt"
	"strconv"
)

// Token is the fencing token of one leadership term. Tokens start at 1; the
// zero Token means "no token". A higher token always belongs to a later term.
type Token uint64

// String returns the token in decimal, the form ParseToken reads.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// ParseToken reads a token written by Token.String: a decimal number from 1
// to 2^64-1 without sign or leading zeros.
func ParseToken(s string) (Token, error) {
	t, err := parse(s)
	if err == nil && t == 0 {
		err = fmt.Errorf("fencing: parse token %q: tokens start at 1", s)
	}
	return t, err
}

func parse(s string) (Token, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("fencing: parse token %q: exceeds 2^64-1", s)
	case err != nil:
		return 0, fmt.Errorf("fencing: parse token %q: not a decimal number", s)
	case len(s) > 1 && s[0] == '0':
		return 0, fmt.Errorf("fencing: parse token %q: leading zero", s) // one token, one spelling
	}
	return Token(n), nil
}

// MarshalText implements encoding.TextMarshaler.
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Unlike ParseToken it
// accepts "0", so that an unset Token survives a round trip.
func (t *Token) UnmarshalText(b []byte) error {
	v, err := parse(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
