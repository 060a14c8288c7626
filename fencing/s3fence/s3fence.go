package s3fence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/internal/awskit"
)

// API is the part of the S3 client a Client uses. *s3.Client implements it.
type API interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

var _ API = (*s3.Client)(nil)

// Metadata keys of the fence, sent as x-amz-meta-fencing-token and so on.
// The SDK hands metadata back with lower-case keys.
const (
	tokenMetadata     = "fencing-token"
	leaseMetadata     = "fencing-lease"
	tombstoneMetadata = "fencing-tombstone"
)

// Defaults for the Config fields left zero.
const (
	// defaultAttempts is the default Config.Attempts: a put reads and
	// writes at most 10 times before it gives up.
	defaultAttempts = 10
	// defaultConflictBackoff is the default Config.ConflictBackoff: the
	// first wait after a 409 is random, up to 20ms.
	defaultConflictBackoff = 20 * time.Millisecond
)

// maxBackoff caps any one wait after a 409.
const maxBackoff = time.Second

// Config configures a Client.
type Config struct {
	// Attempts is how many times PutObject reads the object and sends the
	// conditional write before giving up, when other writers keep changing
	// the object between the two (412) or keep a conditional write in flight
	// (409). Default 10; 1 turns retries off.
	Attempts int
	// ConflictBackoff bounds the random wait before the first retry after a
	// 409 ConditionalRequestConflict; the bound doubles with each retry, up
	// to 1s. Default 20ms.
	ConflictBackoff time.Duration
}

func (c *Config) validate() error {
	switch {
	case c.Attempts < 0:
		return fmt.Errorf("s3fence: Config.Attempts is %d: want 0 (default %d) or more", c.Attempts, defaultAttempts)
	case c.Attempts == 0:
		c.Attempts = defaultAttempts
	}
	switch {
	case c.ConflictBackoff < 0 || c.ConflictBackoff > maxBackoff:
		return fmt.Errorf("s3fence: Config.ConflictBackoff is %v: want 0 (default %v) to %v", c.ConflictBackoff, defaultConflictBackoff, maxBackoff)
	case c.ConflictBackoff == 0:
		c.ConflictBackoff = defaultConflictBackoff
	}
	return nil
}

// Client writes the caller's objects under the fence its context carries. It
// is safe for concurrent use and never modifies its inputs.
type Client struct {
	api      API
	attempts int
	backoff  time.Duration
}

// New returns a Client that sends its requests through api (usually an
// *s3.Client). It makes no request.
func New(api API, cfg Config) (*Client, error) {
	if api == nil {
		return nil, errors.New("s3fence: nil API")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Client{api: api, attempts: cfg.Attempts, backoff: cfg.ConflictBackoff}, nil
}

// PutObject is (*s3.Client).PutObject with the fence ctx carries: it writes
// the object only if the stored object has no fence or one of the same lease
// with a token no higher, and the written object carries the fence in its
// metadata. Each attempt is a HeadObject, the check, and a PutObject with
// If-Match: the ETag read (If-None-Match: * if there was no object), so the
// write applies only to the object that was checked. When another writer
// changed the object in between (412), PutObject reads it again; after a 409
// ConditionalRequestConflict it waits (jittered backoff) and reads again; at
// most Config.Attempts times.
//
// A refusal by the fence is an error matching fencing.ErrStaleToken (a
// *fencing.StaleTokenError naming the stored token) or fencing.ErrWrongLease,
// and nothing is written.
//
// The caller's own preconditions are kept: with IfNoneMatch "*" the object is
// created only if absent (no HeadObject is needed, as there is no fence to
// read), and with IfMatch it is written only over that ETag; their failure is
// the SDK's error, unchanged, unless the object that made them fail carries a
// fence that refuses ours, which is then reported instead. The caller's
// Metadata must not use the fence's keys. A Body read by a failed attempt is
// rewound for the next, so it must be an io.Seeker if a retry may be needed
// (bytes.Reader, strings.Reader and os.File are).
func (c *Client) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	where := fmt.Sprintf("s3://%s/%s", aws.ToString(in.Bucket), aws.ToString(in.Key))
	f, ok := fencing.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("s3fence: put %s: %w", where, fencing.ErrNoFence)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("s3fence: put %s: %w", where, err)
	}
	if err := fencing.Err(ctx); err != nil {
		return nil, fmt.Errorf("s3fence: put %s: %v: term over, not sent: %w", where, f, err)
	}
	for k := range in.Metadata {
		if isFenceKey(k) {
			return nil, fmt.Errorf("s3fence: put %s: Metadata sets %q, a key the fence owns", where, k)
		}
	}
	out, err := c.put(ctx, in, f, false, optFns)
	if err != nil {
		return nil, fmt.Errorf("s3fence: put %s: %w", where, err)
	}
	return out, nil
}

// Tombstone replaces an object with an empty one whose metadata keeps the
// fence and marks it deleted (IsTombstone), under the same conditions as
// PutObject. A deleted object would take its fence with it, and a stale writer
// could then create it again; a tombstone refuses that writer. Readers must
// treat a tombstone as absent. S3 has no fenced delete: a DeleteObject cannot
// be made conditional on the fence, and some servers (MinIO) ignore If-Match
// on DeleteObject altogether, so the only safe delete is by the current
// leader, or by a person, once no older term can still write.
func (c *Client) Tombstone(ctx context.Context, bucket, key string, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	where := fmt.Sprintf("s3://%s/%s", bucket, key)
	f, ok := fencing.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("s3fence: tombstone %s: %w", where, fencing.ErrNoFence)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("s3fence: tombstone %s: %w", where, err)
	}
	if err := fencing.Err(ctx); err != nil {
		return nil, fmt.Errorf("s3fence: tombstone %s: %v: term over, not sent: %w", where, f, err)
	}
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(""), ContentLength: aws.Int64(0)}
	out, err := c.put(ctx, in, f, true, optFns)
	if err != nil {
		return nil, fmt.Errorf("s3fence: tombstone %s: %w", where, err)
	}
	return out, nil
}

// put runs the read-check-write loop.
func (c *Client) put(ctx context.Context, in *s3.PutObjectInput, f fencing.Fence, tombstone bool, optFns []func(*s3.Options)) (*s3.PutObjectOutput, error) {
	seeker, _ := in.Body.(io.Seeker)
	var start int64
	if seeker != nil {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
	}
	meta := make(map[string]string, len(in.Metadata)+3)
	for k, v := range in.Metadata {
		meta[k] = v
	}
	meta[tokenMetadata], meta[leaseMetadata] = f.Token.String(), f.Lease
	if tombstone {
		meta[tombstoneMetadata] = "true"
	}
	userMatch, userCreate := aws.ToString(in.IfMatch), aws.ToString(in.IfNoneMatch) == "*"

	conflicts := 0
	for attempt := 1; ; attempt++ {
		if attempt > 1 && in.Body != nil {
			if seeker == nil {
				return nil, errors.New("the object changed while it was written and the body cannot be sent again: make Body an io.Seeker")
			}
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return nil, fmt.Errorf("rewind body: %w", err)
			}
		}
		put := *in
		put.Metadata = meta
		if !userCreate {
			cur, etag, err := c.head(ctx, in, optFns)
			if err != nil {
				return nil, err
			}
			if err := fencing.Check(cur, f); err != nil {
				return nil, err
			}
			switch {
			case userMatch != "":
				// The caller's If-Match stands; if it names another ETag
				// the server refuses, as the caller asked.
			case etag == "":
				put.IfNoneMatch = aws.String("*")
			default:
				put.IfMatch = aws.String(etag)
			}
		}
		out, err := c.api.PutObject(ctx, &put, optFns...)
		if err == nil {
			return out, nil
		}
		code, status := awskit.ErrorCode(err)
		changed := status == 412 || code == "PreconditionFailed" ||
			code == "NoSuchKey" && put.IfMatch != nil // If-Match on an object deleted meanwhile
		switch {
		case changed && (userMatch != "" || userCreate):
			// The caller's precondition failed. Say so, unless a newer
			// term's write is what changed the object.
			if cur, _, herr := c.head(ctx, in, optFns); herr == nil {
				if ferr := fencing.Check(cur, f); ferr != nil {
					return nil, ferr
				}
			}
			return nil, err
		case changed:
			// Another writer got in between the read and the write: read
			// again.
		case code == "ConditionalRequestConflict":
			conflicts++
			if attempt < c.attempts {
				if err := awskit.Backoff(ctx, c.backoff, conflicts, maxBackoff); err != nil {
					return nil, fmt.Errorf("waiting to retry after 409 ConditionalRequestConflict: %w", err)
				}
			}
		default:
			return nil, err
		}
		if attempt >= c.attempts {
			return nil, fmt.Errorf("gave up after %d attempts, each beaten by another writer (412) or by a conditional write in flight (409); not written: %w", attempt, err)
		}
	}
}

// head returns the stored object's fence and ETag; the zero Fence and ""
// if there is no object.
func (c *Client) head(ctx context.Context, in *s3.PutObjectInput, optFns []func(*s3.Options)) (fencing.Fence, string, error) {
	out, err := c.api.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket:               in.Bucket,
		Key:                  in.Key,
		ExpectedBucketOwner:  in.ExpectedBucketOwner,
		SSECustomerAlgorithm: in.SSECustomerAlgorithm,
		SSECustomerKey:       in.SSECustomerKey,
		SSECustomerKeyMD5:    in.SSECustomerKeyMD5,
	}, optFns...)
	if err != nil {
		if code, status := awskit.ErrorCode(err); status == 404 || code == "NotFound" || code == "NoSuchKey" {
			return fencing.Fence{}, "", nil
		}
		return fencing.Fence{}, "", fmt.Errorf("read the stored object's fence: %w", err)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		return fencing.Fence{}, "", errors.New("read the stored object's fence: the server sent no ETag, so a write cannot be made conditional on it")
	}
	f, err := FenceOf(out.Metadata)
	if err != nil {
		return fencing.Fence{}, "", fmt.Errorf("the stored object's fence refused the write: %w", err)
	}
	return f, etag, nil
}

// FenceOf returns the fence in an object's metadata (as HeadObject and
// GetObject return it): the zero Fence if it has none, and an error if it is
// malformed (a bad token, a lease that fencing.Fence.Validate refuses, one
// without the other). Keys match in any case.
func FenceOf(metadata map[string]string) (fencing.Fence, error) {
	tok, hasTok := lookup(metadata, tokenMetadata)
	lease, hasLease := lookup(metadata, leaseMetadata)
	switch {
	case !hasTok && !hasLease:
		return fencing.Fence{}, nil
	case !hasTok || !hasLease:
		return fencing.Fence{}, fmt.Errorf("s3fence: metadata has one of %s and %s without the other", tokenMetadata, leaseMetadata)
	}
	t, err := fencing.ParseToken(tok)
	if err != nil {
		return fencing.Fence{}, fmt.Errorf("s3fence: metadata %s: %w", tokenMetadata, err)
	}
	f := fencing.Fence{Lease: lease, Token: t}
	if err := f.Validate(); err != nil {
		return fencing.Fence{}, fmt.Errorf("s3fence: metadata %s: %w", leaseMetadata, err)
	}
	return f, nil
}

// IsTombstone reports whether an object's metadata marks it as a tombstone
// that Tombstone wrote.
func IsTombstone(metadata map[string]string) bool {
	v, ok := lookup(metadata, tombstoneMetadata)
	return ok && v == "true"
}

func lookup(metadata map[string]string, key string) (string, bool) {
	if v, ok := metadata[key]; ok {
		return v, true
	}
	for k, v := range metadata {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return "", false
}

func isFenceKey(k string) bool {
	return strings.EqualFold(k, tokenMetadata) || strings.EqualFold(k, leaseMetadata) || strings.EqualFold(k, tombstoneMetadata)
}
