package dynamolease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAPI is the part of the DynamoDB client CreateTable uses.
// *dynamodb.Client implements it.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// defaultTableWait is how long CreateTable waits, by default, for the table
// to become ACTIVE.
const defaultTableWait = 5 * time.Minute

// TableOptions describe the table CreateTable makes. KeyAttribute and
// TTLAttribute must match the Config of the Stores that use the table.
type TableOptions struct {
	// KeyAttribute names the partition key, of type S. Default "lease".
	KeyAttribute string

	// TTLAttribute, when set, turns on DynamoDB Time to Live for that
	// attribute. Default "" (TTL is left as it is, off for a new table).
	// Read the package documentation on TTL first.
	TTLAttribute string

	// MaxWait bounds the wait for the table to become ACTIVE. Default 5 minutes.
	MaxWait time.Duration
}

// CreateTable makes a table for lease items: a partition key of type S named
// opts.KeyAttribute, no sort key, on-demand (PAY_PER_REQUEST) billing. It
// waits until the table is ACTIVE and then, if opts.TTLAttribute is set,
// enables Time to Live on that attribute.
//
// A table that already exists with that key schema is not an error, whatever
// its billing mode; one with another key schema is, and so is TTL already on
// for another attribute. It calls CreateTable and DescribeTable and, with
// TTL, DescribeTimeToLive and UpdateTimeToLive; the IAM policy must allow
// those on the table (docs/dynamodb.md has one).
func CreateTable(ctx context.Context, api TableAPI, table string, opts TableOptions) error {
	cfg := Config{Table: table, KeyAttribute: opts.KeyAttribute, TTLAttribute: opts.TTLAttribute}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	key := cfg.KeyAttribute
	wait := opts.MaxWait
	if wait <= 0 {
		wait = defaultTableWait
	}

	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: &key, AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: &key, KeyType: types.KeyTypeHash},
		},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %q: %w", table, err)
	}
	// ResourceInUseException: the table exists, or is being made; either way
	// wait for it and then check what it looks like.

	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) {
		// The SDK's default (20s to 120s) suits big tables; an empty
		// on-demand table is usually ACTIVE within seconds.
		o.MinDelay = time.Second
		o.MaxDelay = 10 * time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: &table}, wait)
	if err != nil {
		return fmt.Errorf("create table %q: wait until ACTIVE: %w", table, err)
	}
	if err := checkKeySchema(out.Table, key); err != nil {
		return fmt.Errorf("create table %q: %w", table, err)
	}

	if cfg.TTLAttribute == "" {
		return nil
	}
	if err := enableTTL(ctx, api, table, cfg.TTLAttribute); err != nil {
		return fmt.Errorf("create table %q: enable TTL on %q: %w", table, cfg.TTLAttribute, err)
	}
	return nil
}

// checkKeySchema reports whether desc has exactly one key, a hash key of type
// S named key.
func checkKeySchema(desc *types.TableDescription, key string) error {
	if desc == nil {
		return errors.New("DescribeTable returned no table description")
	}
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range desc.AttributeDefinitions {
		if d.AttributeName != nil {
			attrTypes[*d.AttributeName] = d.AttributeType
		}
	}
	var have []string
	for _, k := range desc.KeySchema {
		if k.AttributeName != nil {
			have = append(have, fmt.Sprintf("%s %s (%s)", k.KeyType, *k.AttributeName, attrTypes[*k.AttributeName]))
		}
	}
	ok := len(desc.KeySchema) == 1 && desc.KeySchema[0].KeyType == "HASH" &&
		desc.KeySchema[0].AttributeName != nil && *desc.KeySchema[0].AttributeName == key && attrTypes[key] == "S"
	if !ok {
		return fmt.Errorf("the table exists with key schema [%s]; lease items need [HASH %s (S)] and nothing else",
			strings.Join(have, ", "), key)
	}
	return nil
}

// enableTTL turns on Time to Live for attr unless it is on already.
// DynamoDB refuses to enable TTL twice (ValidationException "TimeToLive is
// already enabled"), so it looks first.
func enableTTL(ctx context.Context, api TableAPI, table, attr string) error {
	desc, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return err
	}
	if d := desc.TimeToLiveDescription; d != nil && d.AttributeName != nil {
		switch d.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if *d.AttributeName == attr {
				return nil
			}
			return fmt.Errorf("TTL is %s on attribute %q; turn it off first (TTL applies to one attribute per table)",
				strings.ToLower(string(d.TimeToLiveStatus)), *d.AttributeName)
		}
	}
	enabled := true
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: &attr,
			Enabled:       &enabled,
		},
	})
	return err
}
