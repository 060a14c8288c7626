package s3lease_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure/lease/s3lease"
)

// A Store on Amazon S3, with credentials and region from the environment.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	store, err := s3lease.New(s3.NewFromConfig(cfg), s3lease.Config{
		Bucket: "my-leases",
		Prefix: "tenure/",
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = store // pass it to tenure as the lease.Store
}

// A Store on an S3-compatible server such as MinIO or versitygw.
func ExampleNew_compatibleServer() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		log.Fatal(err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://minio.internal:9000")
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	store, err := s3lease.New(client, s3lease.Config{Bucket: "leases"})
	if err != nil {
		log.Fatal(err)
	}
	_ = store
}
