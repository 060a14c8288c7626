// Package recordjson is the JSON form of a lease.Record that the object and
// key-value stores keep (lease/s3lease, lease/gcslease, lease/azbloblease,
// lease/etcdlease): one format, one strict reader, so that a record reads the
// same, and a corrupt one is reported the same, whatever holds it.
package recordjson

import (
	"bytes"
	cryptorand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/lease"
)

// SchemaVersion is the value of "v" in every lease object this package writes,
// and the only one it reads. A change to the format that an older reader could
// misread gets a new number; lease/s3lease's doc says how to roll it out.
const SchemaVersion = 1

// MaxSize is the most bytes a store reads from a lease object. A larger
// object is reported as a *lease.RecordError with Field "body" without being
// read. The largest valid record encodes to about 2.3 KiB (a 256-byte holder
// of quotes, a 64-byte nonce, a 1 KiB payload in base64), so the cap only ever
// stops objects that tenure did not write.
const MaxSize = 8 << 10

// The fields of a lease object, in the order they are written and checked.
const (
	fieldV = iota
	fieldHolder
	fieldToken
	fieldDuration
	fieldReleased
	fieldNonce
	fieldWrittenAt
	fieldPayload
	fieldWriteID
	numFields
)

// jsonKeys are the keys of the fields in a lease object.
var jsonKeys = [numFields]string{"v", "holder", "token", "duration_ns", "released", "nonce", "written_at", "payload", "write_id"}

// errorFields are the names a *lease.RecordError gives the fields: the names
// lease.Record.Validate uses, so that an error reads the same whether the bad
// value came from a caller or from the bucket.
var errorFields = [numFields]string{"v", "holder", "token", "duration", "released", "nonce", "written_at", "payload", "write_id"}

// wants says what each field must hold, for errors.
var wants = [numFields]string{"the number 1", "a string", "an integer from 1 to 2^63-1", "an integer number of nanoseconds",
	"true or false", "a string", "an RFC 3339 time string", "a base64 string", "a string"}

// required marks the fields every object must have. payload is left out when
// empty; write_id exists only to make each body unique and its value is never
// read.
var required = [numFields]bool{true, true, true, true, true, true, true, false, false}

// wire is a lease object as JSON. Numbers go through uint64 and int64, never
// float64, so a token up to 2^63-1 and a duration up to 2^63-1 ns read back
// exactly; times and payloads are strings, parsed with the strictness the
// schema asks for.
type wire struct {
	V         int    `json:"v"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	Duration  int64  `json:"duration_ns"`
	Released  bool   `json:"released"`
	Nonce     string `json:"nonce"`
	WrittenAt string `json:"written_at"`
	Payload   string `json:"payload,omitempty"` // standard padded base64
	WriteID   string `json:"write_id"`
}

// Encode returns the JSON body that stores rec, on one line:
//
//	{"v":1,"holder":"a","token":7,"duration_ns":10000000000,"released":false,
//	 "nonce":"a-1","written_at":"2025-03-14T09:39:26.535897932Z",
//	 "payload":"YWRkcg==","write_id":"9f86d081884c7d659a2feaa0c55ad015"}
//
// rec must have passed Validate.
func Encode(rec lease.Record, writeID string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // holders and nonces stay readable in the bucket
	_ = enc.Encode(wire{
		V: SchemaVersion, Holder: rec.Holder, Token: rec.Token, Duration: int64(rec.Duration),
		Released: rec.Released, Nonce: rec.Nonce, WrittenAt: rec.WrittenAt.UTC().Format(time.RFC3339Nano),
		Payload: base64.StdEncoding.EncodeToString(rec.Payload), WriteID: writeID,
	}) // cannot fail: every field is a string, a number or a bool
	return b.Bytes()
}

// Decode parses a lease object strictly: one JSON object, "v" equal
// to SchemaVersion, every required key present once with a value of its
// type, no other key (matched exactly, case included), and a record that
// passes lease.Record.Validate. Anything else is a *lease.RecordError
// naming the lease and the field ("json" when the body is not such an
// object, or holds a key the schema does not know).
//
// Numbers decode into integers, never through float64, so a token and a
// duration read back exactly.
func Decode(name string, data []byte) (lease.Record, error) {
	bad := func(field, format string, args ...any) (lease.Record, error) {
		return lease.Record{}, &lease.RecordError{Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	var raw map[string]json.RawMessage // the keys as written, for what a struct cannot tell
	switch err := json.Unmarshal(data, &raw); {
	case len(bytes.TrimSpace(data)) == 0:
		return bad("json", "object is empty, want a JSON lease record")
	case err != nil || raw == nil:
		return bad("json", "not a JSON object, want a lease record: %s", short(fmt.Sprint(err)))
	}
	// The schema version first: a newer schema may hold keys this one does
	// not know, and should be reported as such.
	switch v := string(raw["v"]); {
	case v == "":
		return bad("v", `key "v" (schema version) is missing; this build reads version %d`, SchemaVersion)
	case v != strconv.Itoa(SchemaVersion):
		return bad("v", "schema version %s is not supported: this build reads version %d only (was the object written by a newer tenure?)", short(v), SchemaVersion)
	}
	for key := range raw { // exactly, case included: a struct would take "Token" for "token"
		if fieldOf(key) < 0 {
			return bad("json", "unknown key %s (schema version %d has %s; keys match exactly, case included)", quoteShort(key), SchemaVersion, strings.Join(jsonKeys[:], ", "))
		}
	}
	if f := repeatedKey(data); f != "" {
		return bad(errorField(f), "key %s appears more than once", quoteShort(f))
	}
	for f, key := range jsonKeys {
		switch v, ok := raw[key]; {
		case !ok && required[f]:
			return bad(errorFields[f], "key %q is missing", key)
		case string(v) == "null":
			return bad(errorFields[f], "key %q is null, want %s", key, wants[f])
		}
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return bad(errorField(te.Field), "key %q is %s, want %s", te.Field, short(string(raw[te.Field])), wants[fieldOf(te.Field)])
		}
		return bad("json", "%s", short(err.Error()))
	}
	if w.Duration < 0 {
		return bad("duration", `key "duration_ns" is negative: %d`, w.Duration)
	}
	rec := lease.Record{Holder: w.Holder, Token: w.Token, Duration: time.Duration(w.Duration), Released: w.Released, Nonce: w.Nonce}
	var err error
	if rec.WrittenAt, err = time.Parse(time.RFC3339Nano, w.WrittenAt); err != nil {
		return bad("written_at", `key "written_at" is %s, want an RFC 3339 time: %v`, quoteShort(w.WrittenAt), err)
	}
	// The whole object is at most MaxSize bytes, so this allocation is
	// bounded; Validate reports a payload that decodes too long.
	if w.Payload != "" {
		if rec.Payload, err = base64.StdEncoding.Strict().DecodeString(w.Payload); err != nil {
			return bad("payload", `key "payload" is not standard padded base64: %v`, err)
		}
	}
	if err := rec.Validate(name); err != nil {
		return lease.Record{}, err
	}
	return rec, nil
}

// repeatedKey returns a top-level key that data, a JSON object, holds more
// than once, or "": a map or a struct keeps only one of them, and two
// readers might keep different ones.
func repeatedKey(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := t.(string)
		if seen[key] {
			return key
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
	}
	return ""
}

// fieldOf returns the field a key names, or -1.
func fieldOf(key string) int {
	for f, k := range jsonKeys {
		if k == key {
			return f
		}
	}
	return -1
}

// errorField names the field of key for a *lease.RecordError: the name
// lease.Record.Validate uses, or "json" for a key the schema lacks.
func errorField(key string) string {
	if f := fieldOf(key); f >= 0 {
		return errorFields[f]
	}
	return "json"
}

// short cuts s to 40 bytes for an error message, so that a huge hand-written
// value does not flood a log.
func short(s string) string {
	const limit = 40
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// quoteShort quotes s, cut by short.
func quoteShort(s string) string {
	if t := short(s); len(t) < len(s) {
		return strconv.Quote(t[:len(t)-3]) + "..."
	}
	return strconv.Quote(s)
}

// NewWriteID returns 32 random hex digits for Encode's writeID: it makes every
// body unique, so that a store whose version is a hash of the body (an S3
// ETag) never hands out a version twice.
func NewWriteID() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}
