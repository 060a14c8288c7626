package dynamolease

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/internal/awskit"
	"github.com/tenure-go/tenure/lease"
)

// The attributes of a lease item besides the partition key (and the optional
// TTL attribute). Their names are fixed: an item is meant to be read by people
// with the console or the AWS CLI as well as by tenure.
const (
	attrHolder    = "holder"      // S
	attrToken     = "token"       // N, 1 to 2^63-1
	attrDuration  = "duration_ns" // N, nanoseconds
	attrReleased  = "released"    // BOOL
	attrNonce     = "nonce"       // S
	attrWrittenAt = "written_at"  // S, RFC 3339 in UTC with nanoseconds; absent when zero
	attrPayload   = "payload"     // B; absent when empty
	attrVersion   = "version"     // S, minted by the store for every write
)

// recordAttributes lists the names above, which the key and TTL attributes
// must not take.
var recordAttributes = []string{attrHolder, attrToken, attrDuration, attrReleased, attrNonce, attrWrittenAt, attrPayload, attrVersion}

// The names decode gives in lease.RecordError.Field: those of lease.Record's
// fields as Record.Validate spells them, and "version" for the store's own.
const (
	fieldHolder    = "holder"
	fieldToken     = "token"
	fieldDuration  = "duration"
	fieldReleased  = "released"
	fieldNonce     = "nonce"
	fieldWrittenAt = "written_at"
	fieldPayload   = "payload"
	fieldVersion   = "version"
)

// encode returns the item that stores rec, valid, under name at version ver.
// now is the time the TTL counts from.
func (s *Store) encode(name string, rec lease.Record, ver lease.Version, now time.Time) (map[string]types.AttributeValue, error) {
	item := make(map[string]types.AttributeValue, 10)
	item[s.key] = &types.AttributeValueMemberS{Value: name}
	item[attrHolder] = &types.AttributeValueMemberS{Value: rec.Holder}
	item[attrToken] = &types.AttributeValueMemberN{Value: strconv.FormatUint(rec.Token, 10)}
	item[attrDuration] = &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(rec.Duration), 10)}
	item[attrReleased] = &types.AttributeValueMemberBOOL{Value: rec.Released}
	item[attrNonce] = &types.AttributeValueMemberS{Value: rec.Nonce}
	item[attrVersion] = &types.AttributeValueMemberS{Value: string(ver)}
	if !rec.WrittenAt.IsZero() {
		t := rec.WrittenAt.UTC()
		if y := t.Year(); y < 0 || y > 9999 {
			// RFC 3339 has four-digit years; Validate does not look at
			// WrittenAt, so this store checks it.
			return nil, &lease.RecordError{Name: name, Field: fieldWrittenAt, Reason: fmt.Sprintf("year %d is outside 0 to 9999", y)}
		}
		item[attrWrittenAt] = &types.AttributeValueMemberS{Value: t.Format(time.RFC3339Nano)}
	}
	if len(rec.Payload) > 0 {
		// The SDK serializes the request before PutItem returns; copying
		// anyway keeps the item independent of the caller's buffer.
		item[attrPayload] = &types.AttributeValueMemberB{Value: bytes.Clone(rec.Payload)}
	}
	if s.ttl != "" {
		expires := now.Add(rec.Duration + s.slack)
		item[s.ttl] = &types.AttributeValueMemberN{Value: strconv.FormatInt(expires.Unix()+1, 10)}
	}
	return item, nil
}

// decode reads the record stored in item for lease name, and its version. It
// is strict: a missing attribute, one of the wrong type, or a value out of
// range is a *lease.RecordError naming the lease and the field, and the
// record must pass Record.Validate. Attributes it does not know (the TTL
// attribute, or any a person added) are ignored.
func decode(name string, item map[string]types.AttributeValue) (lease.Record, lease.Version, error) {
	var (
		rec lease.Record
		ver string
		err error
	)
	if rec.Holder, err = stringAttr(name, item, attrHolder, fieldHolder, true); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if rec.Token, err = tokenAttr(name, item); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if rec.Duration, err = durationAttr(name, item); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if rec.Released, err = boolAttr(name, item, attrReleased, fieldReleased); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if rec.Nonce, err = stringAttr(name, item, attrNonce, fieldNonce, true); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if rec.WrittenAt, err = timeAttr(name, item); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if rec.Payload, err = bytesAttr(name, item, attrPayload, fieldPayload); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if ver, err = stringAttr(name, item, attrVersion, fieldVersion, true); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	switch {
	case ver == "":
		return lease.Record{}, lease.NoVersion, badAttr(name, fieldVersion, attrVersion, "empty")
	case len(ver) > maxVersionLen:
		return lease.Record{}, lease.NoVersion, badAttr(name, fieldVersion, attrVersion, fmt.Sprintf("%d bytes, limit %d", len(ver), maxVersionLen))
	}
	if err := rec.Validate(name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, lease.Version(ver), nil
}

// maxVersionLen bounds a version read from an item. The store writes 26
// bytes; the limit only keeps a hand-made item from passing a huge one on.
const maxVersionLen = 128

func badAttr(name, field, attr, reason string) error {
	return &lease.RecordError{Name: name, Field: field, Reason: fmt.Sprintf("attribute %q: %s", attr, reason)}
}

func wrongType(name, field, attr, want string, got types.AttributeValue) error {
	return badAttr(name, field, attr, fmt.Sprintf("type %s, want %s", awskit.AttributeType(got), want))
}

// stringAttr returns attribute attr of type S, or "" when it is absent and
// not required.
func stringAttr(name string, item map[string]types.AttributeValue, attr, field string, required bool) (string, error) {
	av, ok := item[attr]
	if !ok {
		if required {
			return "", badAttr(name, field, attr, "missing")
		}
		return "", nil
	}
	v, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return "", wrongType(name, field, attr, "S", av)
	}
	return v.Value, nil
}

// numberAttr returns the text of the required attribute attr, of type N.
func numberAttr(name string, item map[string]types.AttributeValue, attr, field string) (string, error) {
	av, ok := item[attr]
	if !ok {
		return "", badAttr(name, field, attr, "missing")
	}
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return "", wrongType(name, field, attr, "N", av)
	}
	return v.Value, nil
}

func tokenAttr(name string, item map[string]types.AttributeValue) (uint64, error) {
	text, err := numberAttr(name, item, attrToken, fieldToken)
	if err != nil {
		return 0, err
	}
	token, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, badAttr(name, fieldToken, attrToken, fmt.Sprintf("%q is not an integer from 1 to 2^63-1", text))
	}
	return token, nil // Validate checks the range tenure allows
}

func durationAttr(name string, item map[string]types.AttributeValue) (time.Duration, error) {
	text, err := numberAttr(name, item, attrDuration, fieldDuration)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, badAttr(name, fieldDuration, attrDuration, fmt.Sprintf("%q is not a whole number of nanoseconds that fits in 64 bits", text))
	}
	if ns < 0 {
		return 0, badAttr(name, fieldDuration, attrDuration, fmt.Sprintf("negative: %dns", ns))
	}
	return time.Duration(ns), nil // Validate checks the range tenure allows
}

func boolAttr(name string, item map[string]types.AttributeValue, attr, field string) (bool, error) {
	av, ok := item[attr]
	if !ok {
		return false, badAttr(name, field, attr, "missing")
	}
	v, ok := av.(*types.AttributeValueMemberBOOL)
	if !ok {
		return false, wrongType(name, field, attr, "BOOL", av)
	}
	return v.Value, nil
}

func timeAttr(name string, item map[string]types.AttributeValue) (time.Time, error) {
	av, ok := item[attrWrittenAt]
	if !ok {
		return time.Time{}, nil // a zero WrittenAt is not stored
	}
	v, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return time.Time{}, wrongType(name, fieldWrittenAt, attrWrittenAt, "S", av)
	}
	t, err := time.Parse(time.RFC3339Nano, v.Value)
	if err != nil {
		return time.Time{}, badAttr(name, fieldWrittenAt, attrWrittenAt, fmt.Sprintf("%q is not an RFC 3339 time", v.Value))
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		// An offset can carry a time past the years encode can write.
		return time.Time{}, badAttr(name, fieldWrittenAt, attrWrittenAt, fmt.Sprintf("%q is in year %d UTC, outside 0 to 9999", v.Value, y))
	}
	return t, nil
}

// bytesAttr returns optional attribute attr of type B, nil when absent. The
// slice is the SDK's, freshly decoded for this response, so the caller owns
// it. Its length is checked by Validate.
func bytesAttr(name string, item map[string]types.AttributeValue, attr, field string) ([]byte, error) {
	av, ok := item[attr]
	if !ok {
		return nil, nil
	}
	v, ok := av.(*types.AttributeValueMemberB)
	if !ok {
		return nil, wrongType(name, field, attr, "B", av)
	}
	return v.Value, nil
}
