package s3fence_test

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/s3fence"
	"github.com/tenure-go/tenure/internal/testservers"
)

// counter counts the requests that pass through it.
type counter struct {
	s3fence.API
	n atomic.Int64
}

func (c *counter) HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c.n.Add(1)
	return c.API.HeadObject(ctx, in, optFns...)
}

func (c *counter) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.n.Add(1)
	return c.API.PutObject(ctx, in, optFns...)
}

// BenchmarkIntegration compares a plain PutObject with a fenced one (a
// HeadObject, then a conditional PutObject) on each S3 server, one write at a
// time, overwriting a 1 KiB object: the difference is the fence's cost per
// write. req/op counts the requests sent.
//
//	scripts/testservers.sh run -- go test -run '^$' -bench Integration -benchtime 2000x ./fencing/s3fence/
func BenchmarkIntegration(b *testing.B) {
	ctx := fencing.NewContext(context.Background(), fencing.Fence{Lease: "bench/lease", Token: 7})
	body := bytes.Repeat([]byte("x"), 1024)
	for _, srv := range testservers.S3Servers(b) {
		raw := srv.Client()
		bucket := testservers.NewBucket(b, raw)
		for _, mode := range []string{"plain", "fenced"} {
			b.Run(srv.Name+"/PutObject/"+mode, func(b *testing.B) {
				api := &counter{API: raw}
				fc, err := s3fence.New(api, s3fence.Config{})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					// Unique bodies, as the package requires.
					copy(body, strconv.Itoa(i))
					in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("bench/" + mode), Body: bytes.NewReader(body)}
					if mode == "fenced" {
						_, err = fc.PutObject(ctx, in)
					} else {
						_, err = api.PutObject(ctx, in)
					}
					if err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(api.n.Load())/float64(i), "req/op")
			})
		}
		// Paired: one plain and one fenced write per iteration, in
		// alternating order, each timed, so that drift in the server
		// affects both alike.
		b.Run(srv.Name+"/PutObject/paired", func(b *testing.B) {
			fc, err := s3fence.New(raw, s3fence.Config{})
			if err != nil {
				b.Fatal(err)
			}
			var total [2]time.Duration
			i := 0
			for b.Loop() {
				copy(body, strconv.Itoa(i))
				for k := range 2 {
					j := (i + k) % 2
					in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("bench/paired-" + strconv.Itoa(j)), Body: bytes.NewReader(body)}
					start := time.Now()
					if j == 0 {
						_, err = raw.PutObject(ctx, in)
					} else {
						_, err = fc.PutObject(ctx, in)
					}
					if err != nil {
						b.Fatal(err)
					}
					total[j] += time.Since(start)
				}
				i++
			}
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(i) }
			b.ReportMetric(us(total[0]), "plain-us/op")
			b.ReportMetric(us(total[1]), "fenced-us/op")
			b.ReportMetric(us(total[1]-total[0]), "extra-us/op")
		})
	}
}
