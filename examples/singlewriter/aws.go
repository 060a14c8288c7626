package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/dynamofence"
	"github.com/tenure-go/tenure/fencing/s3fence"
)

// loadAWS returns the AWS config for region and endpoint. With an endpoint
// and no keys in the environment, it uses dummy keys, which DynamoDB Local
// accepts.
func loadAWS(ctx context.Context, region, endpoint string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

// dynamoResource is one item, written with dynamofence.
type dynamoResource struct {
	raw   *dynamodb.Client
	fc    *dynamofence.Client
	table string
	key   string
}

func openDynamoDB(ctx context.Context, table, key, region, endpoint string) (*dynamoResource, error) {
	cfg, err := loadAWS(ctx, region, endpoint)
	if err != nil {
		return nil, err
	}
	raw := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			// DynamoDB Local sends error responses without the CRC32
			// header, which the SDK would warn about.
			o.DisableValidateResponseChecksum = true
		}
	})
	return newDynamoResource(ctx, raw, table, key)
}

func newDynamoResource(ctx context.Context, raw *dynamodb.Client, table, key string) (*dynamoResource, error) {
	if err := ensureTable(ctx, raw, table); err != nil {
		return nil, err
	}
	fc, err := dynamofence.New(raw, dynamofence.Config{})
	if err != nil {
		return nil, err
	}
	return &dynamoResource{raw: raw, fc: fc, table: table, key: key}, nil
}

// ensureTable creates the table if it is missing and waits until it is active.
func ensureTable(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &missing):
		return fmt.Errorf("describe table %s: %w", table, err)
	}
	_, err = c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	return dynamodb.NewTableExistsWaiter(c).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute)
}

func (r *dynamoResource) Write(ctx context.Context, value string) error {
	_, err := r.fc.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.table),
		Item: map[string]types.AttributeValue{
			"id":    &types.AttributeValueMemberS{Value: r.key},
			"value": &types.AttributeValueMemberS{Value: value},
		},
	})
	return err
}

func (r *dynamoResource) Read(ctx context.Context) (string, fencing.Fence, error) {
	out, err := r.raw.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(r.table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: r.key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fencing.Fence{}, err
	}
	f, err := r.fc.FenceOf(out.Item)
	if err != nil {
		return "", fencing.Fence{}, err
	}
	v, _ := out.Item["value"].(*types.AttributeValueMemberS)
	if v == nil {
		return "", f, fmt.Errorf("item %s in table %s has no value", r.key, r.table)
	}
	return v.Value, f, nil
}

func (r *dynamoResource) String() string {
	return fmt.Sprintf("DynamoDB item %q in table %s, fenced by dynamofence", r.key, r.table)
}

// s3Resource is one object, written with s3fence. Every value names its
// writer, term and sequence number, so no two writes store the same bytes
// (which s3fence needs: see its package documentation).
type s3Resource struct {
	raw    *s3.Client
	fc     *s3fence.Client
	bucket string
	key    string
}

func openS3(ctx context.Context, bucket, key, region, endpoint string) (*s3Resource, error) {
	if bucket == "" {
		return nil, errors.New("-resource s3 needs -bucket")
	}
	cfg, err := loadAWS(ctx, region, endpoint)
	if err != nil {
		return nil, err
	}
	raw := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	return newS3Resource(raw, bucket, key)
}

func newS3Resource(raw *s3.Client, bucket, key string) (*s3Resource, error) {
	fc, err := s3fence.New(raw, s3fence.Config{})
	if err != nil {
		return nil, err
	}
	return &s3Resource{raw: raw, fc: fc, bucket: bucket, key: key}, nil
}

func (r *s3Resource) Write(ctx context.Context, value string) error {
	_, err := r.fc.PutObject(ctx, &s3.PutObjectInput{
		Bucket:      aws.String(r.bucket),
		Key:         aws.String(r.key),
		Body:        strings.NewReader(value),
		ContentType: aws.String("text/plain; charset=utf-8"),
	})
	return err
}

func (r *s3Resource) Read(ctx context.Context) (string, fencing.Fence, error) {
	out, err := r.raw.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(r.key)})
	if err != nil {
		return "", fencing.Fence{}, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 1<<20))
	if err != nil {
		return "", fencing.Fence{}, err
	}
	f, err := s3fence.FenceOf(out.Metadata)
	return string(b), f, err
}

func (r *s3Resource) String() string {
	return fmt.Sprintf("S3 object s3://%s/%s, fenced by s3fence", r.bucket, r.key)
}
