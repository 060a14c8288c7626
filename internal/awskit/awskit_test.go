package awskit

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

func TestBackoffBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for attempt, bound := range map[int]time.Duration{1: 300 * time.Millisecond, 2: 600 * time.Millisecond, 3: time.Second, 40: time.Second} {
			for range 50 {
				start := time.Now()
				if err := Backoff(t.Context(), 300*time.Millisecond, attempt, time.Second); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d <= 0 || d > bound {
					t.Fatalf("wait before retry %d took %v, want (0, %v]", attempt, d, bound)
				}
			}
		}
	})
}

func TestErrorCodeAndAttributeType(t *testing.T) {
	if code, _ := ErrorCode(&smithy.GenericAPIError{Code: "NoSuchBucket"}); code != "NoSuchBucket" {
		t.Errorf("code = %q", code)
	}
	if code, status := ErrorCode(errors.New("plain")); code != "" || status != 0 {
		t.Errorf("plain error: %q %d", code, status)
	}
	if got := AttributeType(&types.AttributeValueMemberBOOL{}); got != "BOOL" {
		t.Errorf("type = %q", got)
	}
	if got := AttributeType(nil); got != "missing" {
		t.Errorf("nil = %q", got)
	}
}
