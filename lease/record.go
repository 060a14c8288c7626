package lease

import (
	"bytes"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on what a record and a lease name may hold. They keep a record well
// inside one DynamoDB read unit (4 KiB) and make a corrupt record easy to spot.
const (
	MaxNameLen    = 200              // bytes in a lease name
	MaxHolderLen  = 256              // bytes in a holder identity
	MaxNonceLen   = 64               // bytes in a write nonce
	MaxPayloadLen = 1024             // bytes of payload
	MinDuration   = time.Millisecond // shortest lease a record may ask for
	MaxDuration   = 24 * time.Hour   // longest lease a record may ask for
)

// Record is what a store keeps for one lease.
type Record struct {
	// Holder is the identity of the candidate that wrote the record.
	Holder string
	// Token is the fencing token of the holder's term. It is minted as the
	// previous token + 1 inside the write that acquires the lease, kept by
	// renewals and by release, and so never goes back. Tokens start at 1.
	Token uint64
	// Duration is the lease the holder asked for. Followers time expiry by
	// this value, not by their own configuration.
	Duration time.Duration
	// Released marks a lease given up on purpose: it may be taken at once.
	Released bool
	// Nonce is unique to the write that stored this record, so that a writer
	// whose response was lost can read back and learn whether it applied.
	Nonce string
	// WrittenAt is the writer's wall-clock time, for humans only: tenure never
	// compares it with another clock.
	WrittenAt time.Time
	// Payload is small optional data from the holder, such as its address.
	Payload []byte
}

// Validate reports the first rule rec breaks as a *RecordError naming the lease
// name and the field, or nil.
func (r Record) Validate(name string) error {
	bad := func(field, format string, args ...any) error {
		return &RecordError{Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	year := r.WrittenAt.UTC().Year()
	switch {
	case r.Holder == "":
		return bad("holder", "empty")
	case len(r.Holder) > MaxHolderLen:
		return bad("holder", "%d bytes, limit %d", len(r.Holder), MaxHolderLen)
	case !printable(r.Holder):
		return bad("holder", "not printable UTF-8: %q", r.Holder)
	case r.Token == 0:
		return bad("token", "missing (tokens start at 1)")
	case r.Token > 1<<63-1:
		// Tokens travel as signed integers in SQL and as decimal strings in
		// headers; keeping them below 2^63 keeps every such form exact.
		return bad("token", "%d exceeds 2^63-1", r.Token)
	case r.Duration < MinDuration:
		return bad("duration", "%v is below the minimum %v", r.Duration, MinDuration)
	case r.Duration > MaxDuration:
		return bad("duration", "%v exceeds the maximum %v", r.Duration, MaxDuration)
	case r.Nonce == "":
		return bad("nonce", "empty")
	case len(r.Nonce) > MaxNonceLen:
		return bad("nonce", "%d bytes, limit %d", len(r.Nonce), MaxNonceLen)
	case !printable(r.Nonce):
		return bad("nonce", "not printable UTF-8: %q", r.Nonce)
	case len(r.Payload) > MaxPayloadLen:
		return bad("payload", "%d bytes, limit %d", len(r.Payload), MaxPayloadLen)
	case year < 1 || year > 9999:
		// Stores keep it in UTC as RFC 3339, which has four-digit years.
		return bad("written_at", "year %d outside [1, 9999]", year)
	}
	return nil
}

// Equal reports whether r and o hold the same values. WrittenAt is compared
// with time.Time.Equal, so a monotonic reading or location makes no difference.
func (r Record) Equal(o Record) bool {
	return r.Holder == o.Holder && r.Token == o.Token && r.Duration == o.Duration &&
		r.Released == o.Released && r.Nonce == o.Nonce && r.WrittenAt.Equal(o.WrittenAt) &&
		bytes.Equal(r.Payload, o.Payload)
}

// Clone returns a copy of r that shares no memory with it.
func (r Record) Clone() Record {
	if r.Payload != nil {
		r.Payload = bytes.Clone(r.Payload)
	}
	return r
}

// ValidateName reports whether name may name a lease: 1 to MaxNameLen bytes of
// ASCII letters, digits and "-_.:/", starting with a letter or digit, where
// "/" separates non-empty segments other than "." and "..". The rule keeps
// names safe as S3 keys and DynamoDB keys alike: S3-compatible servers that
// keep objects as files clean or refuse such segments, which would make two
// names one object.
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q is %d bytes, limit %d", ErrInvalidName, name[:32]+"...", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if alnum || i > 0 && (c == '-' || c == '_' || c == '.' || c == ':' || c == '/') {
			continue
		}
		return fmt.Errorf("%w: %q: byte %d (%q) is not allowed (letters, digits and -_.:/ after the first)", ErrInvalidName, name, i, c)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q: \"/\" must separate non-empty segments other than \".\" and \"..\"", ErrInvalidName, name)
		}
	}
	return nil
}

func printable(s string) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			ascii = false
			break
		}
	}
	if ascii { // the common case, without decoding runes
		return true
	}
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
