package s3lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure/internal/awskit"
	"github.com/tenure-go/tenure/internal/recordjson"
	"github.com/tenure-go/tenure/lease"
)

// API is the part of the S3 client that Store uses. *s3.Client implements it;
// a wrapper may add tracing or metrics. Store passes an option to PutObject
// that turns the SDK's own retries off (see the package doc), so a wrapper
// must hand optFns on to the client.
type API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ API = (*s3.Client)(nil)

// Defaults for Config fields left zero.
const (
	// defaultConflictAttempts is the default Config.ConflictAttempts: a Put
	// answered 409 ConditionalRequestConflict is sent up to 5 times in all.
	defaultConflictAttempts = 5
	// defaultConflictBackoff is the default Config.ConflictBackoff: the
	// first retry after a 409 waits a random time of up to 20ms.
	defaultConflictBackoff = 20 * time.Millisecond
)

// maxObjectSize is the most bytes Get reads from a lease object. A larger
// object is reported as a *lease.RecordError with Field "body" without being
// read: the largest valid record encodes to about 2.3 KiB.
const maxObjectSize = recordjson.MaxSize

// maxConflictBackoff caps the wait before any one retry after a 409.
const maxConflictBackoff = time.Second

// maxKeyLen is the longest key S3 takes, in bytes.
const maxKeyLen = 1024

// maxSegmentLen is the longest '/'-separated part of a key that file-backed
// S3-compatible servers take, in bytes: they store each part as a file or
// directory name (MinIO answers KeyTooLong or XMinioInvalidObjectName).
const maxSegmentLen = 255

// maxPrefixLen is the longest Config.Prefix, in bytes: 424. A lease name is at
// most lease.MaxNameLen bytes and grows to at most three times that when its
// slashes are escaped (see Store.Key); the prefix gets the rest of the 1024
// bytes an S3 key may have.
const maxPrefixLen = maxKeyLen - 3*lease.MaxNameLen

// Config configures a Store. Bucket is required.
type Config struct {
	// Bucket holds the lease objects. It must follow the S3 bucket naming
	// rules: 3 to 63 bytes of lowercase letters, digits, '.' and '-',
	// starting and ending with a letter or digit.
	Bucket string

	// Prefix is put in front of every object key, for example "tenure/" or
	// "prod/leases/". Default "": keys are the escaped lease names alone.
	// It may be at most 424 bytes of printable UTF-8, must not
	// start with '/', and must have no empty, "." or ".." path segment
	// (file-backed S3 servers refuse or collapse them).
	Prefix string

	// ConflictAttempts is how many times Put sends a write that the server
	// keeps answering with 409 ConditionalRequestConflict (another
	// conditional write to the same key was in flight) before it gives up
	// with an error that is not a conflict. Default 5;
	// 1 turns the retries off.
	ConflictAttempts int

	// ConflictBackoff is the longest wait before the first retry after a
	// 409. Each wait is random ("full jitter") up to a bound that starts at
	// ConflictBackoff and doubles with each retry, capped at 1s; a
	// cancelled ctx ends the wait at once. Default 20ms.
	ConflictBackoff time.Duration
}

// validate fills in defaults and reports the first field that is wrong.
func (c *Config) validate() error {
	if err := validateBucket(c.Bucket); err != nil {
		return err
	}
	if err := validatePrefix(c.Prefix); err != nil {
		return err
	}
	switch {
	case c.ConflictAttempts < 0:
		return fmt.Errorf("s3lease: Config.ConflictAttempts is %d: want 0 (default %d) or more", c.ConflictAttempts, defaultConflictAttempts)
	case c.ConflictAttempts == 0:
		c.ConflictAttempts = defaultConflictAttempts
	}
	switch {
	case c.ConflictBackoff < 0:
		return fmt.Errorf("s3lease: Config.ConflictBackoff is %v: want 0 (default %v) or more", c.ConflictBackoff, defaultConflictBackoff)
	case c.ConflictBackoff > maxConflictBackoff:
		return fmt.Errorf("s3lease: Config.ConflictBackoff is %v: at most %v (a 409 means a competing write is in flight for milliseconds)", c.ConflictBackoff, maxConflictBackoff)
	case c.ConflictBackoff == 0:
		c.ConflictBackoff = defaultConflictBackoff
	}
	return nil
}

func validateBucket(b string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("s3lease: Config.Bucket %q: "+format, append([]any{b}, args...)...)
	}
	switch {
	case b == "":
		return errors.New("s3lease: Config.Bucket is empty")
	case strings.HasPrefix(b, "s3://") || strings.HasPrefix(b, "arn:"):
		return bad("want the bare bucket name, not a URL or ARN")
	case strings.Contains(b, "/"):
		return bad("a bucket name has no '/'; put the key prefix in Config.Prefix")
	case len(b) < 3 || len(b) > 63:
		return bad("%d bytes, want 3 to 63", len(b))
	case net.ParseIP(b) != nil:
		return bad("a bucket name must not look like an IP address")
	case strings.Contains(b, ".."):
		return bad("a bucket name must not hold two adjacent periods")
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (c != '.' && c != '-' || i == 0 || i == len(b)-1) {
			return bad("byte %d (%q): want lowercase letters, digits, '.' and '-', starting and ending with a letter or digit", i, c)
		}
	}
	return nil
}

func validatePrefix(p string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("s3lease: Config.Prefix %q: "+format, append([]any{p}, args...)...)
	}
	switch {
	case len(p) > maxPrefixLen:
		return bad("%d bytes, limit %d (S3 keys are at most %d bytes)", len(p), maxPrefixLen, maxKeyLen)
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("must not start with '/'")
	}
	for _, r := range p {
		if !unicode.IsPrint(r) {
			return bad("holds the unprintable character %U", r)
		}
	}
	// Every segment but the last is a path component of every key; the last
	// is completed by the lease name, which starts with a letter or digit.
	segs := strings.Split(p, "/")
	for _, s := range segs[:len(segs)-1] {
		switch s {
		case "":
			return bad("has an empty path segment (\"//\"), which file-backed S3 servers refuse or collapse")
		case ".", "..":
			return bad("has a %q path segment, which file-backed S3 servers refuse or collapse", s)
		}
	}
	for _, s := range segs {
		if len(s) >= maxSegmentLen {
			return bad("has a path segment of %d bytes, limit %d with the lease name (file-backed S3 servers store each as a file name)", len(s), maxSegmentLen-1)
		}
	}
	return nil
}

// Store is a lease.Store that keeps each lease in one S3 object. It is safe for
// concurrent use. Make one with New.
type Store struct {
	api      API
	bucket   string
	prefix   string
	attempts int           // sends of a write answered 409, in all
	backoff  time.Duration // bound on the first wait after a 409
}

var _ lease.Store = (*Store)(nil)

// New returns a Store that keeps leases in the bucket cfg names, through api
// (usually an *s3.Client; for an S3-compatible server build it with
// UsePathStyle, BaseEndpoint and checksums "when required", see the package
// doc). It checks cfg but makes no request. It takes the same shape as
// dynamolease.New.
func New(api API, cfg Config) (*Store, error) {
	if api == nil {
		return nil, errors.New("s3lease: nil API: pass an *s3.Client (or another API)")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{
		api:      api,
		bucket:   cfg.Bucket,
		prefix:   cfg.Prefix,
		attempts: cfg.ConflictAttempts,
		backoff:  cfg.ConflictBackoff,
	}, nil
}

// checkKey reports, as a permanent error wrapping lease.ErrInvalidName, a
// key too long for S3 (1024 bytes) or for file-backed servers (255 bytes
// between slashes).
func (s *Store) checkKey(op, name, key string) error {
	var why string
	if len(key) > maxKeyLen {
		why = fmt.Sprintf("is %d bytes, limit %d", len(key), maxKeyLen)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if why == "" && len(seg) > maxSegmentLen {
			why = fmt.Sprintf("has a part of %d bytes between slashes, limit %d (file-backed servers such as MinIO refuse more)", len(seg), maxSegmentLen)
		}
	}
	if why == "" {
		return nil
	}
	return lease.Permanent(fmt.Errorf("%s lease %q: object key s3://%s/%s %s (each '/' in a lease name takes 3 bytes): %w", op, name, s.bucket, key, why, lease.ErrInvalidName))
}

// ErrBucketNotFound reports that the bucket does not exist (S3's
// NoSuchBucket). Errors that match it are permanent.
var ErrBucketNotFound = errors.New("s3lease: bucket not found")

// permanent reports whether an S3 error code is one retrying cannot cure.
func permanent(code string) bool {
	switch code {
	case "NoSuchBucket", "AccessDenied", "KeyTooLong", "InvalidBucketName", "XMinioInvalidObjectName",
		"InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled":
		return true
	}
	return false
}

// failed wraps an SDK error with the operation, the lease and the object,
// marking it lease.Permanent when retrying cannot cure it.
func (s *Store) failed(op, name, key string, err error, hint string) error {
	code, _ := awskit.ErrorCode(err)
	dir := "to"
	if op == "get" {
		dir = "from"
	}
	e := fmt.Errorf("%s lease %q %s s3://%s/%s: %w%s", op, name, dir, s.bucket, key, err, hint)
	if code == "NoSuchBucket" {
		e = fmt.Errorf("%s lease %q %s s3://%s/%s: %w (%w)%s", op, name, dir, s.bucket, key, ErrBucketNotFound, err, hint)
	}
	if permanent(code) {
		return lease.Permanent(e)
	}
	return e
}

// Key returns the object key of the lease name: the prefix followed by the
// name with every '/' written as "%2F". Each lease is thus one flat object
// under the prefix, whatever its name: file-backed S3 servers store keys as
// paths, where lease "a" would need "a" to be a file and lease "a/b" a
// directory, and where "a//b", "a/./b" and "a/../b" are refused (MinIO) or
// collapsed into other keys (versitygw). The mapping is one-to-one because a
// lease name never holds '%'. Key does not check name.
func (s *Store) Key(name string) string {
	return s.prefix + strings.ReplaceAll(name, "/", "%2F")
}

// Get implements lease.Store: one GetObject (S3 reads are strongly
// consistent). The version is the object's ETag exactly as the server sent it,
// quotes included. A missing object is an error wrapping lease.ErrNotFound; an
// object that is not a valid record is a *lease.RecordError (see the package
// doc), never a record.
func (s *Store) Get(ctx context.Context, name string) (lease.Record, lease.Version, error) {
	if err := lease.CheckGet(ctx, name); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	if err := s.checkKey("get", name, s.Key(name)); err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.Key(name)),
	})
	if err != nil {
		code, _ := awskit.ErrorCode(err)
		switch code {
		case "NoSuchKey":
			return lease.Record{}, lease.NoVersion, lease.NotFound(name)
		case "AccessDenied":
			return lease.Record{}, lease.NoVersion, s.failed("get", name, s.Key(name), err,
				" (AWS also answers AccessDenied for a missing object unless the caller may s3:ListBucket the bucket)")
		}
		return lease.Record{}, lease.NoVersion, s.failed("get", name, s.Key(name), err, "")
	}
	defer out.Body.Close()

	if n := aws.ToInt64(out.ContentLength); n > maxObjectSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("object is %d bytes, limit %d: not a lease record (not read)", n, maxObjectSize)}
	}
	data, err := readCapped(out.Body, aws.ToInt64(out.ContentLength))
	if err != nil {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get lease %q from s3://%s/%s: read body: %w", name, s.bucket, s.Key(name), err)
	}
	if len(data) > maxObjectSize {
		return lease.Record{}, lease.NoVersion, &lease.RecordError{Name: name, Field: "body",
			Reason: fmt.Sprintf("object is over %d bytes: not a lease record (read no further)", maxObjectSize)}
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return lease.Record{}, lease.NoVersion, fmt.Errorf("get lease %q from s3://%s/%s: the server sent no ETag, which is the lease version", name, s.bucket, s.Key(name))
	}
	rec, err := recordjson.Decode(name, data)
	if err != nil {
		return lease.Record{}, lease.NoVersion, err
	}
	return rec, lease.Version(etag), nil
}

// readCapped reads r to its end, but no more than maxObjectSize+1 bytes. size
// is the length the server announced (0 if none): with it, a body is read
// into one allocation.
func readCapped(r io.Reader, size int64) ([]byte, error) {
	const limit = maxObjectSize + 1
	if size <= 0 || size >= limit {
		size = 512
	}
	buf := make([]byte, 0, size+1) // +1: room to see io.EOF without growing
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), limit-len(buf)))
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// Put implements lease.Store: one conditional PutObject, with If-None-Match: *
// when expect is lease.NoVersion and If-Match: expect otherwise. The new version
// is the ETag the server returns. Put retries a 409 ConditionalRequestConflict
// as Config says, and reports a failed precondition (412, or 404 for If-Match on
// a missing object) as an error wrapping lease.ErrConflict that names the lease;
// S3 does not say what is stored instead, so it is never a *lease.ConflictError.
func (s *Store) Put(ctx context.Context, name string, rec lease.Record, expect lease.Version) (lease.Version, error) {
	if err := lease.CheckPut(ctx, name, rec); err != nil {
		return lease.NoVersion, err
	}
	if err := checkVersion(expect); err != nil {
		// No stored object has such an ETag, so the versions differ.
		return lease.NoVersion, fmt.Errorf("put lease %q: %v: %w", name, err, lease.ErrConflict)
	}
	key := s.Key(name)
	if err := s.checkKey("put", name, key); err != nil {
		return lease.NoVersion, err
	}

	body := recordjson.Encode(rec, recordjson.NewWriteID())
	for attempt := 1; ; attempt++ {
		in := &s3.PutObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(key),
			Body:          bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))),
			ContentType:   aws.String("application/json"),
		}
		if expect == lease.NoVersion {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(string(expect))
		}
		out, err := s.api.PutObject(ctx, in, noSDKRetries)
		if err == nil {
			etag := aws.ToString(out.ETag)
			if etag == "" {
				// Applied, but without a version the caller cannot go
				// on; a non-conflict error makes it read the record back.
				return lease.NoVersion, fmt.Errorf("put lease %q to s3://%s/%s: the write succeeded but the server sent no ETag, which is the lease version", name, s.bucket, key)
			}
			return lease.Version(etag), nil
		}
		code, status := awskit.ErrorCode(err)
		switch {
		case status == 412 || code == "PreconditionFailed":
			return lease.NoVersion, lease.Conflict(name)
		case expect != lease.NoVersion && code == "NoSuchKey":
			// If-Match on an object that does not exist (MinIO and
			// versitygw answer 404 NoSuchKey).
			return lease.NoVersion, lease.Conflict(name)
		case code == "ConditionalRequestConflict":
			if attempt >= s.attempts {
				return lease.NoVersion, fmt.Errorf("put lease %q to s3://%s/%s: %d attempts were each answered 409 (a competing conditional write was in flight each time); not applied: %w",
					name, s.bucket, key, attempt, err)
			}
			if err := awskit.Backoff(ctx, s.backoff, attempt, maxConflictBackoff); err != nil {
				return lease.NoVersion, fmt.Errorf("put lease %q: waiting to retry after 409 ConditionalRequestConflict: %w", name, err)
			}
		default:
			return lease.NoVersion, s.failed("put", name, key, err, "")
		}
	}
}

// noSDKRetries sends a PutObject once. The SDK's retryer would resend a
// conditional write after a reset connection or a 5xx, and if the first send
// had been applied, the second would fail its precondition against our own
// write: a false conflict, where the contract wants an error that makes the
// caller read back and compare its nonce.
func noSDKRetries(o *s3.Options) { o.RetryMaxAttempts = 1 }

// checkVersion rejects an expected version that could make If-Match match an
// object it should not: "*" (MinIO then overwrites any object), a list of
// ETags, or a weak ETag. Versions from this Store are never like that.
func checkVersion(v lease.Version) error {
	switch {
	case v == lease.NoVersion:
		return nil
	case strings.TrimSpace(string(v)) == "*", strings.Contains(string(v), ","), strings.HasPrefix(string(v), "W/"):
		return fmt.Errorf("version %q is not an ETag this store returned", v)
	}
	return nil
}
