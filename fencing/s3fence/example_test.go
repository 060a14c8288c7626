package s3fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure"
	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/s3fence"
)

// The leader writes its report through a Client; a write from a term that is
// over is refused. Each body names its term and sequence number, so no two
// writes store the same bytes (see the package documentation on ETags).
func Example() {
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	reports, err := s3fence.New(s3.NewFromConfig(awsCfg), s3fence.Config{})
	if err != nil {
		log.Fatal(err)
	}
	_ = tenure.Callbacks{
		OnElected: func(ctx context.Context, term tenure.Term) {
			for seq := 1; ctx.Err() == nil; seq++ {
				body := fmt.Sprintf(`{"term":%d,"seq":%d,"total":42}`, term.Token, seq)
				_, err := reports.PutObject(ctx, &s3.PutObjectInput{
					Bucket: aws.String("reports"),
					Key:    aws.String("daily.json"),
					Body:   strings.NewReader(body),
				})
				if errors.Is(err, fencing.ErrStaleToken) {
					return // a newer leader has written: this term is over
				}
			}
		},
	}
}
