// Package awskit holds the few helpers that tenure's AWS-backed packages
// (lease/dynamolease, lease/s3lease, fencing/dynamofence, fencing/s3fence)
// would otherwise each write again.
package awskit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrorCode returns the API error code (e.g. "NoSuchBucket") and the HTTP
// status of an SDK error, where known, or "" and 0.
func ErrorCode(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

// AttributeType names the DynamoDB type of av ("S", "N", "BOOL", …), or
// "missing" for nil.
func AttributeType(av types.AttributeValue) string {
	if av == nil {
		return "missing"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", av), "*types.AttributeValueMember")
}

// Backoff waits before retry number attempt (1 for the first): a random
// time of up to base×2^(attempt-1), capped at limit, or until ctx is done.
func Backoff(ctx context.Context, base time.Duration, attempt int, limit time.Duration) error {
	bound := min(base<<min(attempt-1, 20), limit)
	t := time.NewTimer(rand.N(bound) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
