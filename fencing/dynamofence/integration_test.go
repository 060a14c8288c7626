package dynamofence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tenure-go/tenure/fencing"
	"github.com/tenure-go/tenure/fencing/dynamofence"
	"github.com/tenure-go/tenure/internal/testservers"
)

// newTable creates a table with the partition key pk (S) on DynamoDB Local
// and deletes it when the test ends.
func newTable(t testing.TB, c *dynamodb.Client) string {
	t.Helper()
	table := testservers.UniqueName("tenure-dynamofence")
	ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
	defer cancel()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(c)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, testservers.SetupTimeout); err != nil {
		t.Fatalf("wait for table %s: %v", table, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testservers.SetupTimeout)
		defer cancel()
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Logf("cleanup: delete table %s: %v", table, err)
		}
	})
	return table
}

type env struct {
	t     *testing.T
	raw   *dynamodb.Client
	fc    *dynamofence.Client
	table string
}

func newEnv(t *testing.T) *env {
	c := testservers.DynamoDB(t)
	fc, err := dynamofence.New(c, dynamofence.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, raw: c, fc: fc, table: newTable(t, c)}
}

func under(lease string, tok fencing.Token) context.Context {
	return fencing.NewContext(context.Background(), fencing.Fence{Lease: lease, Token: tok})
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }

// get reads an item with a strongly consistent read; nil if absent.
func (e *env) get(pk string) map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.raw.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, Key: key(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Item
}

func (e *env) put(ctx context.Context, pk, val string) error {
	_, err := e.fc.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &e.table,
		Item:      map[string]types.AttributeValue{"pk": s(pk), "val": s(val)},
	})
	return err
}

// wantItem checks the item's value and fence.
func (e *env) wantItem(pk, val string, f fencing.Fence) {
	e.t.Helper()
	item := e.get(pk)
	if item == nil {
		e.t.Fatalf("item %s is missing, want val=%s under %v", pk, val, f)
	}
	got, err := e.fc.FenceOf(item)
	if err != nil {
		e.t.Fatal(err)
	}
	v, _ := item["val"].(*types.AttributeValueMemberS)
	if v == nil || v.Value != val || got != f {
		e.t.Fatalf("item %s = val %v under %v, want %s under %v", pk, item["val"], got, val, f)
	}
}

func wantStale(t *testing.T, err error, presented, current fencing.Token) {
	t.Helper()
	var se *fencing.StaleTokenError
	if !errors.As(err, &se) || se.Presented != presented || se.Current != current {
		t.Fatalf("got %v, want a StaleTokenError: token %d is stale, %d accepted", err, presented, current)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		t.Errorf("a stale token also matches ConditionalCheckFailedException, which callers read as their own condition")
	}
}

func TestIntegrationPutItem(t *testing.T) {
	e := newEnv(t)
	for _, tok := range []fencing.Token{2, 2, 3} {
		if err := e.put(under("jobs/a", tok), "k", "v"+tok.String()); err != nil {
			t.Fatalf("put under token %d: %v", tok, err)
		}
	}
	e.wantItem("k", "v3", fencing.Fence{Lease: "jobs/a", Token: 3})

	// The zombie of term 1 wakes.
	err := e.put(under("jobs/a", 1), "k", "zombie")
	wantStale(t, err, 1, 3)
	if want := fmt.Sprintf(`dynamofence: put item in table %q: fencing: lease "jobs/a": token 1 is stale, token 3 was already accepted`, e.table); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	e.wantItem("k", "v3", fencing.Fence{Lease: "jobs/a", Token: 3})

	// Another lease cannot order its writes against this one's.
	err = e.put(under("jobs/b", 99), "k", "other")
	var we *fencing.WrongLeaseError
	if !errors.As(err, &we) || we.Current != (fencing.Fence{Lease: "jobs/a", Token: 3}) {
		t.Fatalf("put under another lease: %v, want a WrongLeaseError", err)
	}
	e.wantItem("k", "v3", fencing.Fence{Lease: "jobs/a", Token: 3})

	// A new item: no fence yet, any token.
	if err := e.put(under("jobs/a", 1), "fresh", "x"); err != nil {
		t.Fatalf("put of a new item: %v", err)
	}

	if err := e.put(context.Background(), "k", "unfenced"); !errors.Is(err, fencing.ErrNoFence) {
		t.Errorf("put without a fence: %v, want ErrNoFence", err)
	}
	_, err = e.fc.PutItem(under("jobs/a", 5), &dynamodb.PutItemInput{TableName: &e.table,
		Item: map[string]types.AttributeValue{"pk": s("k"), "fence_token": n(1000)}})
	if err == nil {
		t.Error("PutItem accepted an item that sets fence_token")
	}
	e.wantItem("k", "v3", fencing.Fence{Lease: "jobs/a", Token: 3})
}

// The caller's condition, names and values compose with the fence's, and its
// failure is reported as the SDK reports it, distinct from a stale token.
func TestIntegrationPutItemCallerCondition(t *testing.T) {
	e := newEnv(t)
	if err := e.put(under("a", 5), "k", "v5"); err != nil {
		t.Fatal(err)
	}

	// The caller's placeholders take the names the fence would pick first.
	in := &dynamodb.PutItemInput{
		TableName:                 &e.table,
		Item:                      map[string]types.AttributeValue{"pk": s("k"), "val": s("v6")},
		ConditionExpression:       aws.String("#tenure_fence_token = :tenure_fence_token OR attribute_not_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#tenure_fence_token": "val"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":tenure_fence_token": s("v5")},
	}
	before := fmt.Sprint(*in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, len(in.Item))
	if _, err := e.fc.PutItem(under("a", 6), in); err != nil {
		t.Fatalf("put with the caller's condition: %v", err)
	}
	if after := fmt.Sprint(*in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, len(in.Item)); after != before {
		t.Errorf("PutItem modified its input: %s, was %s", after, before)
	}
	e.wantItem("k", "v6", fencing.Fence{Lease: "a", Token: 6})

	// The caller's condition fails, the fence admits: the SDK's error.
	in.Item = map[string]types.AttributeValue{"pk": s("k"), "val": s("v7")}
	_, err := e.fc.PutItem(under("a", 7), in) // val is v6 now, not v5
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("the caller's condition failed: %v, want the SDK's ConditionalCheckFailedException", err)
	}
	if v, ok := ccf.Item["val"].(*types.AttributeValueMemberS); !ok || v.Value != "v6" {
		t.Errorf("the exception carries item %v, want the stored one (val v6)", ccf.Item)
	}
	e.wantItem("k", "v6", fencing.Fence{Lease: "a", Token: 6})

	// Both fail: the fence is reported.
	_, err = e.fc.PutItem(under("a", 2), in)
	wantStale(t, err, 2, 6)

	// The caller's condition on an absent item fails (no item comes back):
	// not the fence.
	_, err = e.fc.PutItem(under("a", 1), &dynamodb.PutItemInput{
		TableName:           &e.table,
		Item:                map[string]types.AttributeValue{"pk": s("absent"), "val": s("x")},
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	if !errors.As(err, &ccf) || errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("attribute_exists on an absent item: %v, want the SDK's error", err)
	}
}

func TestIntegrationUpdateItem(t *testing.T) {
	e := newEnv(t)
	update := func(ctx context.Context, expr string, values map[string]types.AttributeValue, cond *string) error {
		_, err := e.fc.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &e.table,
			Key:                       key("k"),
			UpdateExpression:          aws.String(expr),
			ConditionExpression:       cond,
			ExpressionAttributeValues: values,
		})
		return err
	}
	// An update creates the item, with the fence.
	if err := update(under("a", 1), "SET val = :v", map[string]types.AttributeValue{":v": s("one")}, nil); err != nil {
		t.Fatal(err)
	}
	e.wantItem("k", "one", fencing.Fence{Lease: "a", Token: 1})

	// Every clause, lower-case keywords, a caller condition.
	err := update(under("a", 4), "set val = :v, tags = :tags add hits :one remove gone",
		map[string]types.AttributeValue{":v": s("four"), ":tags": s("t"), ":one": n(1), ":expect": s("one")},
		aws.String("val = :expect"))
	if err != nil {
		t.Fatalf("update with every clause: %v", err)
	}
	e.wantItem("k", "four", fencing.Fence{Lease: "a", Token: 4})
	if h, ok := e.get("k")["hits"].(*types.AttributeValueMemberN); !ok || h.Value != "1" {
		t.Errorf("ADD did not apply: %v", e.get("k")["hits"])
	}

	// An update without an expression only moves the fence.
	if _, err := e.fc.UpdateItem(under("a", 5), &dynamodb.UpdateItemInput{TableName: &e.table, Key: key("k")}); err != nil {
		t.Fatalf("update without an expression: %v", err)
	}
	e.wantItem("k", "four", fencing.Fence{Lease: "a", Token: 5})

	err = update(under("a", 3), "SET val = :v", map[string]types.AttributeValue{":v": s("zombie")}, nil)
	wantStale(t, err, 3, 5)
	e.wantItem("k", "four", fencing.Fence{Lease: "a", Token: 5})

	err = update(under("a", 6), "SET val = :v", map[string]types.AttributeValue{":v": s("six"), ":x": s("nope")}, aws.String("val = :x"))
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("the caller's condition failed: %v, want the SDK's error", err)
	}
	e.wantItem("k", "four", fencing.Fence{Lease: "a", Token: 5})
}

// A deleted item takes its fence with it, so a stale writer can create it
// again; a tombstone keeps the fence and refuses it.
func TestIntegrationDeleteAndTombstone(t *testing.T) {
	e := newEnv(t)
	del := func(ctx context.Context, pk string) error {
		_, err := e.fc.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &e.table, Key: key(pk)})
		return err
	}
	if err := e.put(under("a", 3), "k", "v"); err != nil {
		t.Fatal(err)
	}
	wantStale(t, del(under("a", 2), "k"), 2, 3)
	e.wantItem("k", "v", fencing.Fence{Lease: "a", Token: 3})
	if err := del(under("a", 3), "k"); err != nil {
		t.Fatal(err)
	}
	if e.get("k") != nil {
		t.Fatal("DeleteItem left the item")
	}
	// The hazard DeleteItem leaves: nothing remembers token 3.
	if err := e.put(under("a", 2), "k", "zombie"); err != nil {
		t.Fatalf("a stale put after a delete: %v (expected to succeed: the fence went with the item)", err)
	}

	// Tombstone instead.
	if err := e.put(under("a", 5), "t", "v"); err != nil {
		t.Fatal(err)
	}
	out, err := e.fc.Tombstone(under("a", 6), &dynamodb.DeleteItemInput{TableName: &e.table, Key: key("t"), ReturnValues: types.ReturnValueAllOld})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := out.Attributes["val"].(*types.AttributeValueMemberS); !ok || v.Value != "v" {
		t.Errorf("Tombstone with ALL_OLD returned %v, want the old item", out.Attributes)
	}
	item := e.get("t")
	if !e.fc.IsTombstone(item) || len(item) != 4 || item["val"] != nil {
		t.Fatalf("tombstone item = %v, want the key, the fence and the mark", item)
	}
	wantStale(t, e.put(under("a", 5), "t", "zombie"), 5, 6)
	_, err = e.fc.Tombstone(under("a", 4), &dynamodb.DeleteItemInput{TableName: &e.table, Key: key("t")})
	wantStale(t, err, 4, 6)

	// The current term brings the item back, by update as by put.
	_, err = e.fc.UpdateItem(under("a", 6), &dynamodb.UpdateItemInput{TableName: &e.table, Key: key("t"),
		UpdateExpression: aws.String("SET val = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("back")}})
	if err != nil {
		t.Fatal(err)
	}
	if e.fc.IsTombstone(e.get("t")) {
		t.Error("an update left the tombstone mark")
	}
	e.wantItem("t", "back", fencing.Fence{Lease: "a", Token: 6})
}

func TestIntegrationTransactWriteItems(t *testing.T) {
	e := newEnv(t)
	for pk, tok := range map[string]fencing.Token{"p": 2, "u": 2, "d": 2, "high": 9} {
		if err := e.put(under("a", tok), pk, "before"); err != nil {
			t.Fatal(err)
		}
	}
	tx := func(ctx context.Context, extra ...types.TransactWriteItem) error {
		items := append([]types.TransactWriteItem{
			{Put: &types.Put{TableName: &e.table, Item: map[string]types.AttributeValue{"pk": s("p"), "val": s("after")}}},
			{Update: &types.Update{TableName: &e.table, Key: key("u"), UpdateExpression: aws.String("SET val = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("after")}}},
			{Delete: &types.Delete{TableName: &e.table, Key: key("d")}},
		}, extra...)
		_, err := e.fc.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}

	// One item fenced higher: nothing applies, and the error names it.
	err := tx(under("a", 3), types.TransactWriteItem{Update: &types.Update{TableName: &e.table, Key: key("high"),
		UpdateExpression: aws.String("SET val = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": s("after")}}})
	wantStale(t, err, 3, 9)
	if want := fmt.Sprintf(`dynamofence: transact write items: item 3 (update in table %q): fencing: lease "a": token 3 is stale, token 9 was already accepted`, e.table); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		t.Error("a stale token also matches TransactionCanceledException")
	}
	e.wantItem("p", "before", fencing.Fence{Lease: "a", Token: 2})
	e.wantItem("d", "before", fencing.Fence{Lease: "a", Token: 2})

	// A ConditionCheck of the caller's fails: the SDK's error, and the
	// ConditionCheck was not fenced (item "high" has token 9).
	err = tx(under("a", 3), types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &e.table, Key: key("high"),
		ConditionExpression: aws.String("val = :x"), ExpressionAttributeValues: map[string]types.AttributeValue{":x": s("nope")}}})
	if !errors.As(err, &tce) || errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("the caller's ConditionCheck failed: %v, want the SDK's TransactionCanceledException", err)
	}

	// All admit: everything applies, with the fence.
	err = tx(under("a", 3), types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: &e.table, Key: key("high"),
		ConditionExpression: aws.String("val = :x"), ExpressionAttributeValues: map[string]types.AttributeValue{":x": s("before")}}})
	if err != nil {
		t.Fatal(err)
	}
	e.wantItem("p", "after", fencing.Fence{Lease: "a", Token: 3})
	e.wantItem("u", "after", fencing.Fence{Lease: "a", Token: 3})
	if e.get("d") != nil {
		t.Error("the delete did not apply")
	}
	e.wantItem("high", "before", fencing.Fence{Lease: "a", Token: 9})
}

// Writers of many terms race on one item, each appending its token to a list
// in the same conditional update: the list is the item's history, so it must
// be in non-decreasing order, and the highest token must have been applied.
func TestIntegrationRacingWriters(t *testing.T) {
	e := newEnv(t)
	const writers, rounds = 8, 6
	var wg sync.WaitGroup
	var mu sync.Mutex // guards stale
	stale := 0
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				tok := fencing.Token(r*2 + w%3 + 1)
				_, err := e.fc.UpdateItem(under("a", tok), &dynamodb.UpdateItemInput{
					TableName:        &e.table,
					Key:              key("race"),
					UpdateExpression: aws.String("SET history = list_append(if_not_exists(history, :empty), :me)"),
					ExpressionAttributeValues: map[string]types.AttributeValue{
						":empty": &types.AttributeValueMemberL{},
						":me":    &types.AttributeValueMemberL{Value: []types.AttributeValue{n(int(tok))}},
					},
				})
				switch {
				case errors.Is(err, fencing.ErrStaleToken):
					mu.Lock()
					stale++
					mu.Unlock()
				case err != nil:
					t.Errorf("writer %d token %d: %v", w, tok, err)
				}
			}
		})
	}
	wg.Wait()
	item := e.get("race")
	var history []int
	for _, v := range item["history"].(*types.AttributeValueMemberL).Value {
		x, _ := strconv.Atoi(v.(*types.AttributeValueMemberN).Value)
		history = append(history, x)
	}
	if !slices.IsSorted(history) {
		t.Errorf("writes applied out of token order: %v", history)
	}
	top := (rounds-1)*2 + 2 + 1
	if f, _ := e.fc.FenceOf(item); f.Token != fencing.Token(top) || history[len(history)-1] != top {
		t.Errorf("fence %v, history ends %v; want token %d", f, history[len(history)-1:], top)
	}
	t.Logf("%d writes applied, %d refused as stale", len(history), stale)
}
