package s3lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tenure-go/tenure/internal/awskit"
	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// These tests need no server. The stub below stands in for the S3 client only
// to hand Store the errors a server sends, built the way the SDK builds them;
// how real servers behave is pinned by the TestIntegration tests.

// stubAPI answers GetObject and PutObject with functions, and records the
// PutObject requests.
type stubAPI struct {
	get func(*s3.GetObjectInput) (*s3.GetObjectOutput, error)
	put func(*s3.PutObjectInput) (*s3.PutObjectOutput, error)

	mu   sync.Mutex // guards puts and opts
	puts []*s3.PutObjectInput
	opts []s3.Options // the options each PutObject's optFns produced
}

func (s *stubAPI) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return s.get(in)
}

func (s *stubAPI) PutObject(_ context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	var o s3.Options
	for _, f := range optFns {
		f(&o)
	}
	s.mu.Lock()
	s.puts = append(s.puts, in)
	s.opts = append(s.opts, o)
	s.mu.Unlock()
	return s.put(in)
}

func (s *stubAPI) putCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.puts)
}

// apiError builds an error shaped like the SDK's for an HTTP error response.
func apiError(op string, status int, code string) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: op,
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      &smithy.GenericAPIError{Code: code, Message: "stub " + code},
			},
			RequestID: "stub",
		},
	}
}

func newTestStore(t *testing.T, api API, cfg Config) *Store {
	t.Helper()
	if cfg.Bucket == "" {
		cfg.Bucket = "leases"
	}
	s, err := New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConfigDefaults(t *testing.T) {
	s := newTestStore(t, &stubAPI{}, Config{})
	if s.attempts != defaultConflictAttempts || s.backoff != defaultConflictBackoff {
		t.Errorf("defaults: attempts %d backoff %v, want %d %v", s.attempts, s.backoff, defaultConflictAttempts, defaultConflictBackoff)
	}
	s = newTestStore(t, &stubAPI{}, Config{ConflictAttempts: 1, ConflictBackoff: time.Second})
	if s.attempts != 1 || s.backoff != time.Second {
		t.Errorf("set: attempts %d backoff %v, want 1 1s", s.attempts, s.backoff)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Bucket: "my-leases.prod-1"}
	tests := []struct {
		label string
		edit  func(*Config)
		want  string // in the error; "" for none
	}{
		{"valid", func(*Config) {}, ""},
		{"valid prefix", func(c *Config) { c.Prefix = "prod/tenure/leases-" }, ""},
		{"valid prefix with slash", func(c *Config) { c.Prefix = "tenure/" }, ""},
		{"valid unicode prefix", func(c *Config) { c.Prefix = "prüfung/" }, ""},
		{"valid longest prefix", func(c *Config) {
			c.Prefix = strings.Repeat(strings.Repeat("p", 200)+"/", 2) + strings.Repeat("p", maxPrefixLen-402)
		}, ""},
		{"prefix segment too long", func(c *Config) { c.Prefix = strings.Repeat("p", maxSegmentLen) + "/" }, "path segment of 255 bytes"},
		{"valid 3-byte bucket", func(c *Config) { c.Bucket = "abc" }, ""},
		{"valid 63-byte bucket", func(c *Config) { c.Bucket = strings.Repeat("b", 63) }, ""},

		{"no bucket", func(c *Config) { c.Bucket = "" }, "Config.Bucket is empty"},
		{"bucket URL", func(c *Config) { c.Bucket = "s3://leases" }, "bare bucket name"},
		{"bucket ARN", func(c *Config) { c.Bucket = "arn:aws:s3:::leases" }, "bare bucket name"},
		{"bucket with prefix", func(c *Config) { c.Bucket = "leases/prod" }, "Config.Prefix"},
		{"bucket short", func(c *Config) { c.Bucket = "ab" }, "2 bytes, want 3 to 63"},
		{"bucket long", func(c *Config) { c.Bucket = strings.Repeat("b", 64) }, "64 bytes"},
		{"bucket upper case", func(c *Config) { c.Bucket = "Leases" }, "lowercase"},
		{"bucket underscore", func(c *Config) { c.Bucket = "my_leases" }, "lowercase"},
		{"bucket leading dash", func(c *Config) { c.Bucket = "-leases" }, "starting and ending"},
		{"bucket trailing dot", func(c *Config) { c.Bucket = "leases." }, "starting and ending"},
		{"bucket double dot", func(c *Config) { c.Bucket = "my..leases" }, "two adjacent periods"},
		{"bucket IP", func(c *Config) { c.Bucket = "192.168.1.1" }, "IP address"},

		{"prefix leading slash", func(c *Config) { c.Prefix = "/tenure/" }, "must not start with '/'"},
		{"prefix double slash", func(c *Config) { c.Prefix = "tenure//x" }, "empty path segment"},
		{"prefix dot segment", func(c *Config) { c.Prefix = "tenure/./" }, `"." path segment`},
		{"prefix dotdot segment", func(c *Config) { c.Prefix = "../tenure/" }, `".." path segment`},
		{"prefix too long", func(c *Config) { c.Prefix = strings.Repeat("p", maxPrefixLen+1) }, "limit 424"},
		{"prefix not UTF-8", func(c *Config) { c.Prefix = "a\xffb/" }, "not valid UTF-8"},
		{"prefix newline", func(c *Config) { c.Prefix = "a\nb/" }, "unprintable"},

		{"negative attempts", func(c *Config) { c.ConflictAttempts = -1 }, "ConflictAttempts is -1"},
		{"negative backoff", func(c *Config) { c.ConflictBackoff = -time.Millisecond }, "ConflictBackoff is -1ms"},
		{"long backoff", func(c *Config) { c.ConflictBackoff = 2 * time.Second }, "at most 1s"},
	}
	for _, tt := range tests {
		cfg := ok
		tt.edit(&cfg)
		s, err := New(&stubAPI{}, cfg)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: New: %v", tt.label, err)
		case tt.want != "" && err == nil:
			t.Errorf("%s: New accepted %+v", tt.label, cfg)
		case tt.want != "" && !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: New: %v; want an error containing %q", tt.label, err, tt.want)
		case tt.want != "" && s != nil:
			t.Errorf("%s: New returned a Store with an error", tt.label)
		}
	}
}

func TestKey(t *testing.T) {
	s := newTestStore(t, &stubAPI{}, Config{Prefix: "tenure/"})
	for name, want := range map[string]string{
		"cron":            "tenure/cron",
		"app/cron":        "tenure/app%2Fcron",
		"a//b/./c/../d/":  "tenure/a%2F%2Fb%2F.%2Fc%2F..%2Fd%2F",
		"svc:writer.v2_x": "tenure/svc:writer.v2_x",
	} {
		if got := s.Key(name); got != want {
			t.Errorf("Key(%q) = %q, want %q", name, got, want)
		}
	}
	if k := s.Key(strings.Repeat("a/", lease.MaxNameLen/2)); len(k) > maxKeyLen-maxPrefixLen+len("tenure/") {
		t.Errorf("longest key is %d bytes", len(k))
	}
}

func TestPutRequest(t *testing.T) {
	api := &stubAPI{put: func(*s3.PutObjectInput) (*s3.PutObjectOutput, error) {
		return &s3.PutObjectOutput{ETag: aws.String(`"v2"`)}, nil
	}}
	s := newTestStore(t, api, Config{Prefix: "p/"})
	ctx := t.Context()
	rec := sampleRecord()

	if v, err := s.Put(ctx, "a/b", rec, lease.NoVersion); err != nil || v != `"v2"` {
		t.Fatalf("Put create = %q, %v", v, err)
	}
	if v, err := s.Put(ctx, "a/b", rec, `"v1"`); err != nil || v != `"v2"` {
		t.Fatalf("Put update = %q, %v", v, err)
	}
	create, update := api.puts[0], api.puts[1]
	if aws.ToString(create.Bucket) != "leases" || aws.ToString(create.Key) != "p/a%2Fb" {
		t.Errorf("create went to %s/%s", aws.ToString(create.Bucket), aws.ToString(create.Key))
	}
	if aws.ToString(create.IfNoneMatch) != "*" || create.IfMatch != nil {
		t.Errorf("create has If-None-Match %v If-Match %v, want * and none", aws.ToString(create.IfNoneMatch), create.IfMatch)
	}
	if aws.ToString(update.IfMatch) != `"v1"` || update.IfNoneMatch != nil {
		t.Errorf("update has If-Match %v If-None-Match %v, want the quoted ETag and none", aws.ToString(update.IfMatch), update.IfNoneMatch)
	}
	for i, o := range api.opts {
		if o.RetryMaxAttempts != 1 {
			t.Errorf("PutObject %d: RetryMaxAttempts = %d, want 1 (no SDK retries of a conditional write)", i, o.RetryMaxAttempts)
		}
	}
	bodies := map[string]bool{}
	for _, in := range api.puts {
		body, err := io.ReadAll(in.Body)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(body)) != aws.ToInt64(in.ContentLength) {
			t.Errorf("ContentLength %d, body %d bytes", aws.ToInt64(in.ContentLength), len(body))
		}
		got, err := recordjson.Decode("a/b", body)
		if err != nil || !got.Equal(rec) {
			t.Errorf("body decodes to %+v, %v; want %+v", got, err, rec)
		}
		bodies[string(body)] = true
	}
	if len(bodies) != 2 {
		t.Error("two writes of one record sent the same bytes")
	}
}

func TestPutErrors(t *testing.T) {
	tests := []struct {
		label    string
		expect   lease.Version
		err      error
		conflict bool
		want     string // in the error
	}{
		{"412 on create", lease.NoVersion, apiError("PutObject", 412, "PreconditionFailed"), true, `lease "x": lease: conflict`},
		{"412 on update", `"v1"`, apiError("PutObject", 412, "PreconditionFailed"), true, `lease "x": lease: conflict`},
		{"412 without code", `"v1"`, apiError("PutObject", 412, ""), true, "conflict"},
		{"404 NoSuchKey on update", `"v1"`, apiError("PutObject", 404, "NoSuchKey"), true, "conflict"},
		{"404 NoSuchBucket on update", `"v1"`, apiError("PutObject", 404, "NoSuchBucket"), false, "NoSuchBucket"},
		{"404 NoSuchBucket on create", lease.NoVersion, apiError("PutObject", 404, "NoSuchBucket"), false, "NoSuchBucket"},
		{"409 parent is a file", lease.NoVersion, apiError("PutObject", 409, "ObjectParentIsFile"), false, "ObjectParentIsFile"},
		{"403", `"v1"`, apiError("PutObject", 403, "AccessDenied"), false, "AccessDenied"},
		{"500", `"v1"`, apiError("PutObject", 500, "InternalError"), false, "InternalError"},
		{"transport", `"v1"`, errors.New("connection reset by peer"), false, "connection reset"},
	}
	for _, tt := range tests {
		api := &stubAPI{put: func(*s3.PutObjectInput) (*s3.PutObjectOutput, error) { return nil, tt.err }}
		s := newTestStore(t, api, Config{})
		_, err := s.Put(t.Context(), "x", sampleRecord(), tt.expect)
		if errors.Is(err, lease.ErrConflict) != tt.conflict || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Put: %v; want conflict=%t and an error containing %q", tt.label, err, tt.conflict, tt.want)
		}
		if n := api.putCount(); n != 1 {
			t.Errorf("%s: %d PutObject calls, want 1", tt.label, n)
		}
	}
}

func TestPutRejectsVersionsThatMatchTooMuch(t *testing.T) {
	api := &stubAPI{put: func(*s3.PutObjectInput) (*s3.PutObjectOutput, error) {
		t.Error("PutObject called")
		return nil, errors.New("unreachable")
	}}
	s := newTestStore(t, api, Config{})
	for _, v := range []lease.Version{"*", " * ", `"a", "b"`, `W/"a"`} {
		if _, err := s.Put(t.Context(), "x", sampleRecord(), v); !errors.Is(err, lease.ErrConflict) {
			t.Errorf("Put with version %q: %v, want a conflict without a request", v, err)
		}
	}
}

func TestPutNoETag(t *testing.T) {
	api := &stubAPI{put: func(*s3.PutObjectInput) (*s3.PutObjectOutput, error) { return &s3.PutObjectOutput{}, nil }}
	s := newTestStore(t, api, Config{})
	_, err := s.Put(t.Context(), "x", sampleRecord(), lease.NoVersion)
	if err == nil || errors.Is(err, lease.ErrConflict) || !strings.Contains(err.Error(), "no ETag") {
		t.Errorf("Put: %v; want a non-conflict error about the missing ETag", err)
	}
}

func TestPutInvalidWrittenAt(t *testing.T) {
	s := newTestStore(t, &stubAPI{}, Config{})
	rec := sampleRecord()
	rec.WrittenAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	var re *lease.RecordError
	if _, err := s.Put(t.Context(), "x", rec, lease.NoVersion); !errors.As(err, &re) || re.Field != "written_at" {
		t.Errorf("Put: %v, want a RecordError for written_at", err)
	}
}

// conflictsThen answers n PutObjects with 409 ConditionalRequestConflict and
// the rest with success.
func conflictsThen(n int) *stubAPI {
	api := &stubAPI{}
	api.put = func(*s3.PutObjectInput) (*s3.PutObjectOutput, error) {
		if api.putCount() <= n {
			return nil, apiError("PutObject", 409, "ConditionalRequestConflict")
		}
		return &s3.PutObjectOutput{ETag: aws.String(`"new"`)}, nil
	}
	return api
}

func TestPut409Retried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := conflictsThen(3)
		s := newTestStore(t, api, Config{ConflictAttempts: 4, ConflictBackoff: 100 * time.Millisecond})
		start := time.Now()
		v, err := s.Put(t.Context(), "x", sampleRecord(), `"old"`)
		if err != nil || v != `"new"` {
			t.Fatalf("Put = %q, %v; want success on the fourth attempt", v, err)
		}
		if n := api.putCount(); n != 4 {
			t.Errorf("%d PutObject calls, want 4", n)
		}
		// Waits are at most 100ms, 200ms, 400ms.
		if waited := time.Since(start); waited <= 0 || waited > 700*time.Millisecond {
			t.Errorf("waited %v in all, want more than 0 and at most 700ms", waited)
		}
		// Every attempt sends the same body: the write was never applied.
		first, _ := io.ReadAll(api.puts[0].Body)
		last, _ := io.ReadAll(api.puts[3].Body)
		if string(first) != string(last) {
			t.Error("a retry sent a different body")
		}
	})
}

func TestPut409GivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := conflictsThen(1000)
		s := newTestStore(t, api, Config{ConflictAttempts: 3})
		_, err := s.Put(t.Context(), "x", sampleRecord(), lease.NoVersion)
		if err == nil || errors.Is(err, lease.ErrConflict) || !strings.Contains(err.Error(), "3 attempts") {
			t.Fatalf("Put: %v; want a non-conflict error after 3 attempts", err)
		}
		if code, _ := awskit.ErrorCode(err); code != "ConditionalRequestConflict" {
			t.Errorf("error %v does not wrap the server's", err)
		}
		if n := api.putCount(); n != 3 {
			t.Errorf("%d PutObject calls, want 3", n)
		}
	})
}

func TestPut409NoRetries(t *testing.T) {
	api := conflictsThen(1)
	s := newTestStore(t, api, Config{ConflictAttempts: 1})
	if _, err := s.Put(t.Context(), "x", sampleRecord(), lease.NoVersion); err == nil || errors.Is(err, lease.ErrConflict) {
		t.Fatalf("Put: %v; want a non-conflict error", err)
	}
	if n := api.putCount(); n != 1 {
		t.Errorf("%d PutObject calls, want 1", n)
	}
}

func TestPut409WaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := conflictsThen(1000)
		s := newTestStore(t, api, Config{ConflictBackoff: time.Second})
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.Put(ctx, "x", sampleRecord(), `"old"`)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Put: %v, want an error matching context.DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited > time.Millisecond {
			t.Errorf("Put returned %v after the deadline passed", waited-time.Millisecond)
		}
	})
}

func TestGetErrors(t *testing.T) {
	tests := []struct {
		label string
		err   error
		is    error
		want  string
	}{
		{"NoSuchKey", apiError("GetObject", 404, "NoSuchKey"), lease.ErrNotFound, `lease "x": lease: not found`},
		{"NoSuchBucket", apiError("GetObject", 404, "NoSuchBucket"), lease.ErrPermanent, "NoSuchBucket"},
		{"AccessDenied", apiError("GetObject", 403, "AccessDenied"), lease.ErrPermanent, "s3:ListBucket"},
		{"KeyTooLong", apiError("GetObject", 400, "KeyTooLong"), lease.ErrPermanent, "KeyTooLong"},
		{"500", apiError("GetObject", 500, "InternalError"), nil, "s3://leases/x"},
	}
	for _, tt := range tests {
		s := newTestStore(t, &stubAPI{get: func(*s3.GetObjectInput) (*s3.GetObjectOutput, error) { return nil, tt.err }}, Config{})
		_, _, err := s.Get(t.Context(), "x")
		if err == nil || tt.is != nil && !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Get: %v; want an error matching %v containing %q", tt.label, err, tt.is, tt.want)
		}
		if tt.is == nil && errors.Is(err, lease.ErrNotFound) {
			t.Errorf("%s: Get: %v matches lease.ErrNotFound", tt.label, err)
		}
		if tt.label == "500" && errors.Is(err, lease.ErrPermanent) {
			t.Errorf("%s: a server error marked permanent: %v", tt.label, err)
		}
	}
}

// Keys too long for S3 (1024 bytes) or for file-backed servers (255 bytes
// between slashes) are refused before any request, as permanent errors.
func TestKeyTooLong(t *testing.T) {
	sent := 0
	api := &stubAPI{
		get: func(*s3.GetObjectInput) (*s3.GetObjectOutput, error) { sent++; return nil, errors.New("sent") },
		put: func(*s3.PutObjectInput) (*s3.PutObjectOutput, error) { sent++; return nil, errors.New("sent") },
	}
	long := strings.Repeat("a/", 99) + "a" // 199 bytes; its key part is 397 bytes
	for _, tc := range []struct {
		prefix, name string
		ok           bool
	}{
		{"tenure/", long, false},
		{"tenure/", strings.Repeat("a", 200), true},
		{strings.Repeat("p", 200) + "/" + strings.Repeat("q", 60), strings.Repeat("a", 194), true},
		{strings.Repeat("p", 200) + "/" + strings.Repeat("q", 60), strings.Repeat("a", 196), false},
	} {
		sent = 0
		s := newTestStore(t, api, Config{Prefix: tc.prefix})
		rec := lease.Record{Holder: "h", Token: 1, Duration: time.Second, Nonce: "n"}
		_, _, gerr := s.Get(t.Context(), tc.name)
		_, perr := s.Put(t.Context(), tc.name, rec, lease.NoVersion)
		for _, err := range []error{gerr, perr} {
			refused := errors.Is(err, lease.ErrPermanent) && errors.Is(err, lease.ErrInvalidName) && strings.Contains(err.Error(), "limit")
			if refused == tc.ok {
				t.Errorf("prefix %d bytes, name %d bytes: %v", len(tc.prefix), len(tc.name), err)
			}
		}
		if !tc.ok && sent != 0 {
			t.Errorf("prefix %d bytes, name %d bytes: %d requests sent", len(tc.prefix), len(tc.name), sent)
		}
	}
}

// body is an object body that counts what is read from it.
type body struct {
	r      io.Reader
	read   int
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *body) Close() error { b.closed = true; return nil }

func getReturning(etag string, length *int64, data io.Reader) (*stubAPI, *body) {
	b := &body{r: data}
	return &stubAPI{get: func(*s3.GetObjectInput) (*s3.GetObjectOutput, error) {
		return &s3.GetObjectOutput{Body: b, ETag: aws.String(etag), ContentLength: length}, nil
	}}, b
}

func TestGetDecodes(t *testing.T) {
	api, b := getReturning(`"e1"`, aws.Int64(int64(len(valid))), strings.NewReader(valid))
	s := newTestStore(t, api, Config{})
	rec, v, err := s.Get(t.Context(), "x")
	if err != nil || v != `"e1"` || rec.Holder != "h" || rec.Token != 7 {
		t.Fatalf("Get = %+v, %q, %v", rec, v, err)
	}
	if !b.closed {
		t.Error("body not closed")
	}
}

func TestGetOversizedAnnounced(t *testing.T) {
	api, b := getReturning(`"e1"`, aws.Int64(1<<30), strings.NewReader(strings.Repeat(" ", 1<<20)))
	s := newTestStore(t, api, Config{})
	_, _, err := s.Get(t.Context(), "x")
	var re *lease.RecordError
	if !errors.As(err, &re) || re.Field != "body" || re.Name != "x" || !strings.Contains(re.Reason, "1073741824 bytes") {
		t.Fatalf("Get: %v, want a RecordError for the body", err)
	}
	if b.read != 0 || !b.closed {
		t.Errorf("read %d bytes of an object announced as too large (closed: %t)", b.read, b.closed)
	}
}

func TestGetOversizedUnannounced(t *testing.T) {
	api, b := getReturning(`"e1"`, nil, strings.NewReader(valid+strings.Repeat(" ", 1<<20)))
	s := newTestStore(t, api, Config{})
	_, _, err := s.Get(t.Context(), "x")
	var re *lease.RecordError
	if !errors.As(err, &re) || re.Field != "body" {
		t.Fatalf("Get: %v, want a RecordError for the body", err)
	}
	if b.read > maxObjectSize+1 {
		t.Errorf("read %d bytes, want at most %d", b.read, maxObjectSize+1)
	}
}

func TestGetNoETag(t *testing.T) {
	api, _ := getReturning("", nil, strings.NewReader(valid))
	s := newTestStore(t, api, Config{})
	if _, _, err := s.Get(t.Context(), "x"); err == nil || !strings.Contains(err.Error(), "no ETag") {
		t.Errorf("Get: %v, want an error about the missing ETag", err)
	}
}

func TestGetBadRecordNamesLease(t *testing.T) {
	api, _ := getReturning(`"e1"`, nil, strings.NewReader(edit(`"token":7`, `"token":"7"`)))
	s := newTestStore(t, api, Config{})
	_, v, err := s.Get(t.Context(), "app/cron")
	var re *lease.RecordError
	if !errors.As(err, &re) || re.Name != "app/cron" || re.Field != "token" || v != lease.NoVersion {
		t.Errorf("Get = %q, %v; want a RecordError for field token of app/cron and no version", v, err)
	}
}

func TestReadCapped(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, maxObjectSize - 1, maxObjectSize, maxObjectSize + 1, maxObjectSize + 2, 1 << 20} {
		data := strings.Repeat("x", n)
		for _, announced := range []int64{0, int64(n)} {
			for _, slow := range []bool{false, true} {
				var r io.Reader = strings.NewReader(data)
				if slow {
					r = iotest.OneByteReader(r)
				}
				got, err := readCapped(r, announced)
				want := min(n, maxObjectSize+1)
				if err != nil || len(got) != want {
					t.Errorf("n=%d announced=%d slow=%t: read %d bytes, %v; want %d", n, announced, slow, len(got), err, want)
				}
			}
		}
	}
	if _, err := readCapped(iotest.ErrReader(errors.New("boom")), 10); err == nil {
		t.Error("a read error was lost")
	}
}

func BenchmarkReadCapped(b *testing.B) {
	data := []byte(valid)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readCapped(bytes.NewReader(data), int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNewNilAPI(t *testing.T) {
	if _, err := New(nil, Config{Bucket: "leases"}); err == nil || !strings.Contains(err.Error(), "nil API") {
		t.Fatalf("New(nil) = %v", err)
	}
}

func sampleRecord() lease.Record {
	return lease.Record{
		Holder:    "host-1",
		Token:     7,
		Duration:  10 * time.Second,
		Nonce:     "n-1",
		WrittenAt: time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("IST", 5*3600+1800)),
		Payload:   []byte("addr"),
	}
}

// valid is a lease object as recordjson writes it.
const valid = `{"v":1,"holder":"h","token":7,"duration_ns":10000000000,"released":false,"nonce":"n-1","written_at":"2025-03-14T15:09:26.535897932Z","payload":"YWRkcg==","write_id":"00"}`

func edit(old, new string) string {
	if !strings.Contains(valid, old) {
		panic(fmt.Sprintf("test bug: %q not in valid", old))
	}
	return strings.Replace(valid, old, new, 1)
}
