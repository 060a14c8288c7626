package dynamofence_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/dynamofence"
	"github.com/tenure-go/tenure/internal/testservers"
)

// counting counts the requests that pass through it.
type counting struct {
	dynamofence.API
	n atomic.Int64
}

func (c *counting) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.n.Add(1)
	return c.API.PutItem(ctx, in, optFns...)
}

func (c *counting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.API.UpdateItem(ctx, in, optFns...)
}

func (c *counting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.n.Add(1)
	return c.API.TransactWriteItems(ctx, in, optFns...)
}

// BenchmarkIntegration compares plain and fenced writes against DynamoDB
// Local, one at a time: the difference is the fence's cost per write
// (latency, allocations; req/op counts requests sent).
//
//	scripts/testservers.sh run -- go test -run '^$' -bench Integration -benchtime 2000x ./fencing/dynamofence/
func BenchmarkIntegration(b *testing.B) {
	raw := testservers.DynamoDB(b)
	table := newTable(b, raw)
	ctx := fencing.NewContext(context.Background(), fencing.Fence{Lease: "bench/lease", Token: 7})
	item := func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk":   s("item-" + strconv.Itoa(i%64)),
			"val":  s("some payload of a typical small item"),
			"seen": n(i),
		}
	}
	update := func(i int) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{
			TableName:                 &table,
			Key:                       key("item-" + strconv.Itoa(i%64)),
			UpdateExpression:          aws.String("SET val = :v ADD hits :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("updated"), ":one": n(1)},
		}
	}
	tx := func(i int) *dynamodb.TransactWriteItemsInput {
		return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &table, Item: item(i)}},
			{Update: &types.Update{TableName: &table, Key: key("tx-" + strconv.Itoa(i%64)), UpdateExpression: aws.String("ADD hits :one"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)}}},
		}}
	}

	for _, mode := range []string{"plain", "fenced"} {
		api := &counting{API: raw}
		var w dynamofence.API = api
		if mode == "fenced" {
			fc, err := dynamofence.New(api, dynamofence.Config{})
			if err != nil {
				b.Fatal(err)
			}
			w = fc
		}
		run := func(b *testing.B, op func(i int) error) {
			b.ReportAllocs()
			api.n.Store(0)
			i := 0
			for b.Loop() {
				if err := op(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(api.n.Load())/float64(i), "req/op")
		}
		b.Run("PutItem/"+mode, func(b *testing.B) {
			run(b, func(i int) error {
				_, err := w.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item(i)})
				return err
			})
		})
		b.Run("UpdateItem/"+mode, func(b *testing.B) {
			run(b, func(i int) error { _, err := w.UpdateItem(ctx, update(i)); return err })
		})
		b.Run("TransactWriteItems/"+mode, func(b *testing.B) {
			run(b, func(i int) error { _, err := w.TransactWriteItems(ctx, tx(i)); return err })
		})
	}

	// Paired: each iteration sends one plain and one fenced PutItem, in
	// alternating order, and times each, so that drift in the server
	// (JIT, GC) affects both alike.
	b.Run("PutItem/paired", func(b *testing.B) {
		fc, err := dynamofence.New(raw, dynamofence.Config{})
		if err != nil {
			b.Fatal(err)
		}
		ops := [2]func(i int) error{
			func(i int) error {
				_, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item(i)})
				return err
			},
			func(i int) error {
				_, err := fc.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item(i + 1000)})
				return err
			},
		}
		pairedLatency(b, ops)
	})
	b.Run("UpdateItem/paired", func(b *testing.B) {
		fc, err := dynamofence.New(raw, dynamofence.Config{})
		if err != nil {
			b.Fatal(err)
		}
		ops := [2]func(i int) error{
			func(i int) error { _, err := raw.UpdateItem(ctx, update(i)); return err },
			func(i int) error { _, err := fc.UpdateItem(ctx, update(i+1000)); return err },
		}
		pairedLatency(b, ops)
	})
	b.Run("TransactWriteItems/paired", func(b *testing.B) {
		fc, err := dynamofence.New(raw, dynamofence.Config{})
		if err != nil {
			b.Fatal(err)
		}
		ops := [2]func(i int) error{
			func(i int) error { _, err := raw.TransactWriteItems(ctx, tx(i)); return err },
			func(i int) error { _, err := fc.TransactWriteItems(ctx, tx(i+1000)); return err },
		}
		pairedLatency(b, ops)
	})

	// A refused write costs the same one request: DynamoDB sends the stored
	// item back with the failure.
	b.Run("PutItem/fenced-refused", func(b *testing.B) {
		api := &counting{API: raw}
		fc, _ := dynamofence.New(api, dynamofence.Config{})
		stale := fencing.NewContext(context.Background(), fencing.Fence{Lease: "bench/lease", Token: 6})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := fc.PutItem(stale, &dynamodb.PutItemInput{TableName: &table, Item: item(i)}); err == nil {
				b.Fatal("a stale write was accepted")
			}
			i++
		}
		b.ReportMetric(float64(api.n.Load())/float64(i), "req/op")
	})
}

// pairedLatency runs ops[0] (plain) and ops[1] (fenced) once per iteration,
// in alternating order, and reports the mean latency of each and their
// difference.
func pairedLatency(b *testing.B, ops [2]func(i int) error) {
	var total [2]time.Duration
	i := 0
	for b.Loop() {
		for k := range 2 {
			j := (i + k) % 2
			start := time.Now()
			if err := ops[j](i); err != nil {
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
}
