package s3lease

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure/internal/awskit"
	"github.com/tenure-go/tenure/lease"
)

// AdminAPI is what List and Delete call beyond API, for operators' tools
// (tenure list, tenure gc, tenure release --force); *s3.Client has it. The
// protocol never calls it: a candidate's policy needs neither
// s3:ListBucket nor s3:DeleteObject.
type AdminAPI interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

var (
	_ lease.Lister  = (*Store)(nil)
	_ lease.Deleter = (*Store)(nil)
)

func (s *Store) admin() (AdminAPI, error) {
	a, ok := s.api.(AdminAPI)
	if !ok {
		return nil, errors.New("s3lease: the API given to New cannot ListObjectsV2 and DeleteObject (an *s3.Client can)")
	}
	return a, nil
}

// List implements lease.Lister with ListObjectsV2 under the store's prefix:
// every object whose key is a lease name's (Key) that starts with prefix.
func (s *Store) List(ctx context.Context, prefix string, fn func(name string) error) error {
	a, err := s.admin()
	if err != nil {
		return err
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.Key(prefix))}
	for {
		out, err := a.ListObjectsV2(ctx, in)
		if err != nil {
			return s.failed("list", prefix+"*", s.Key(prefix), err, "")
		}
		for _, o := range out.Contents {
			name, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			name = strings.ReplaceAll(name, "%2F", "/")
			if !ok || lease.ValidateName(name) != nil || s.Key(name) != aws.ToString(o.Key) {
				continue // not a lease's object
			}
			if err := fn(name); err != nil {
				return err
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// Delete implements lease.Deleter with one DeleteObject, If-Match: the
// version (the ETag); with AnyVersion, without a condition. S3 and
// versitygw honour If-Match on DeleteObject. MinIO ignores it: there a
// Delete may remove a record written since it was read. That stays safe
// (the holder of such a record demotes at its next renewal, and tokens keep
// rising under the lost-record rule), but it cuts that holder's term short:
// on MinIO, run tenure gc when no candidate of the names it removes is
// starting. Deleting a missing object answers no error on some servers.
func (s *Store) Delete(ctx context.Context, name string, expect lease.Version) error {
	if err := lease.CheckDelete(ctx, name); err != nil {
		return err
	}
	if expect != lease.AnyVersion {
		if err := checkVersion(expect); err != nil || expect == lease.NoVersion {
			return fmt.Errorf("delete lease %q: version %q: %w", name, expect, lease.ErrConflict)
		}
	}
	key := s.Key(name)
	if err := s.checkKey("delete", name, key); err != nil {
		return err
	}
	a, err := s.admin()
	if err != nil {
		return err
	}
	in := &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if expect != lease.AnyVersion {
		in.IfMatch = aws.String(string(expect))
	}
	_, err = a.DeleteObject(ctx, in, noSDKRetries)
	if err == nil {
		return nil
	}
	code, status := awskit.ErrorCode(err)
	switch {
	case code == "NoSuchKey" || status == 404:
		return lease.NotFound(name)
	case status == 412 || code == "PreconditionFailed":
		return lease.Conflict(name)
	}
	return s.failed("delete", name, key, err, "")
}
