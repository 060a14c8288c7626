package dynamolease_test

import (
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/internal/testservers"
	"github.com/tenure-go/tenure/lease"
	"github.com/tenure-go/tenure/lease/dynamolease"
)

// BenchmarkIntegrationRenew measures one renewal round trip to DynamoDB
// Local: a Put expecting the current version, with the same token and a new
// nonce. raw-sdk makes the same request by hand (the same item, condition and
// ALL_OLD), so the difference is what the Store adds: validation, encoding,
// error handling.
func BenchmarkIntegrationRenew(b *testing.B) {
	c := testservers.DynamoDB(b)
	table := newTable(b, c, dynamolease.TableOptions{})
	payload := []byte("addr=10.0.0.1:8080")
	warmUp(b, c, table)

	b.Run("tenure", func(b *testing.B) {
		store := newStore(b, c, dynamolease.Config{Table: table})
		name := testservers.UniqueName("bench/renew-tenure") // -count runs this again
		rec := lease.Record{Holder: "host-a", Token: 1, Duration: 10 * time.Second, Nonce: "n-0", WrittenAt: time.Now(), Payload: payload}
		v, err := store.Put(b.Context(), name, rec, lease.NoVersion)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rec.Nonce = "n-" + strconv.Itoa(i+1)
			rec.WrittenAt = time.Now()
			if v, err = store.Put(b.Context(), name, rec, v); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("raw-sdk", func(b *testing.B) {
		name := testservers.UniqueName("bench/renew-raw")
		put := func(i int, expect string) (string, error) {
			version := rand.Text()
			in := &dynamodb.PutItemInput{
				TableName: aws.String(table),
				Item: map[string]types.AttributeValue{
					"lease":       &types.AttributeValueMemberS{Value: name},
					"holder":      &types.AttributeValueMemberS{Value: "host-a"},
					"token":       &types.AttributeValueMemberN{Value: "1"},
					"duration_ns": &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(10*time.Second), 10)},
					"released":    &types.AttributeValueMemberBOOL{Value: false},
					"nonce":       &types.AttributeValueMemberS{Value: "n-" + strconv.Itoa(i)},
					"written_at":  &types.AttributeValueMemberS{Value: time.Now().UTC().Format(time.RFC3339Nano)},
					"payload":     &types.AttributeValueMemberB{Value: payload},
					"version":     &types.AttributeValueMemberS{Value: version},
				},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}
			if expect == "" {
				in.ConditionExpression = aws.String("attribute_not_exists(#k)")
				in.ExpressionAttributeNames = map[string]string{"#k": "lease"}
			} else {
				in.ConditionExpression = aws.String("#v = :v")
				in.ExpressionAttributeNames = map[string]string{"#v": "version"}
				in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: expect}}
			}
			_, err := c.PutItem(b.Context(), in)
			return version, err
		}
		v, err := put(0, "")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if v, err = put(i+1, v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIntegrationGet measures one strongly consistent read, through the
// Store (which decodes and validates the record) and by hand.
func BenchmarkIntegrationGet(b *testing.B) {
	c := testservers.DynamoDB(b)
	table := newTable(b, c, dynamolease.TableOptions{})
	store := newStore(b, c, dynamolease.Config{Table: table})
	const name = "bench/get"
	rec := lease.Record{Holder: "host-a", Token: 1, Duration: 10 * time.Second, Nonce: "n-0", WrittenAt: time.Now(), Payload: []byte("addr=10.0.0.1:8080")}
	if _, err := store.Put(b.Context(), name, rec, lease.NoVersion); err != nil {
		b.Fatal(err)
	}
	warmUp(b, c, table)

	b.Run("tenure", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := store.Get(b.Context(), name); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, err := c.GetItem(b.Context(), &dynamodb.GetItemInput{
				TableName:      aws.String(table),
				Key:            map[string]types.AttributeValue{"lease": &types.AttributeValueMemberS{Value: name}},
				ConsistentRead: aws.Bool(true),
			})
			if err != nil || len(out.Item) == 0 {
				b.Fatal(err)
			}
		}
	})
}

// warmUp sends DynamoDB Local a few hundred writes and reads before anything
// is measured, so that the JVM's warm-up does not land on whichever
// sub-benchmark runs first.
func warmUp(b *testing.B, c *dynamodb.Client, table string) {
	b.Helper()
	key := map[string]types.AttributeValue{"lease": &types.AttributeValueMemberS{Value: "bench/warm-up"}}
	for i := range 500 {
		item := map[string]types.AttributeValue{
			"lease": key["lease"],
			"n":     &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
		}
		if _, err := c.PutItem(b.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			b.Fatal(err)
		}
		if _, err := c.GetItem(b.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)}); err != nil {
			b.Fatal(err)
		}
	}
}
