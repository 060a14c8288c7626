// Package dynamofence fences writes to the caller's own DynamoDB tables: each
// write succeeds only if the item it writes was last written under a fence
// that admits the writer's, and it stores the writer's fence in the item, in
// the same conditional request. A leader paused past its lease that wakes
// and writes is refused by DynamoDB itself.
//
//	fc, err := dynamofence.New(dynamodb.NewFromConfig(awsCfg), dynamofence.Config{})
//	// in OnElected(ctx, term), or below it with ctx passed down:
//	_, err = fc.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("orders"), Item: item})
//	if errors.Is(err, fencing.ErrStaleToken) { /* this term is over: stop writing */ }
//
// Client's PutItem, UpdateItem, DeleteItem and TransactWriteItems have the
// signatures of *dynamodb.Client's, so code written against an interface of
// those methods takes a Client unchanged. They read the fence from ctx
// (fencing.FromContext; tenure puts it in OnElected's context) and return an
// error matching fencing.ErrNoFence if there is none.
//
// # The fence in an item
//
// Every fenced write stores two attributes (names configurable):
//
//	fence_token  N  the writer's token
//	fence_lease  S  the writer's lease
//
// and is conditional on
//
//	attribute_not_exists(fence_token) OR (fence_lease = :lease AND fence_token <= :token)
//
// joined to the caller's ConditionExpression with AND (the caller's in
// parentheses). The placeholders are chosen to differ from every key of the
// caller's ExpressionAttributeNames and ExpressionAttributeValues, so they
// cannot collide with the caller's: DynamoDB refuses expressions that use
// placeholders their maps do not define. An UpdateItem sets the two
// attributes in the SET clause of the caller's UpdateExpression (and removes
// the tombstone mark in its REMOVE clause), adding the clauses if missing.
// Inputs are copied, never modified.
//
// # Guarantees
//
//  1. A write is applied only if, at that moment, the item is absent, has no
//     fence, or has a fence of the same lease with a token no higher than
//     the writer's; the item then holds the writer's fence. DynamoDB
//     evaluates the condition and applies the write atomically, so a write
//     of an older term can never land after one of a newer term. For
//     TransactWriteItems this holds for every Put, Update and Delete, and the
//     transaction applies all or nothing.
//  2. Equal tokens are admitted: all writes of one term go through.
//  3. Items never written through a Client have no fence and admit any
//     writer; their first fenced write fences them. Reads are unaffected.
//
// # Errors: what can and cannot be told apart
//
// Every write asks for ReturnValuesOnConditionCheckFailure=ALL_OLD, so a
// failed condition comes back with the item as it was stored (at no cost in
// capacity units). The fence's condition is then evaluated again on that item:
//
//   - If it refuses, the error wraps a *fencing.StaleTokenError (stored token
//     higher; Current names it) or a *fencing.WrongLeaseError (another lease),
//     and does not match *types.ConditionalCheckFailedException, so code that
//     handles its own condition's failure is not misled.
//   - If it admits, the caller's own condition failed: the error is the SDK's,
//     unchanged, with the stored item in the exception's Item (even if the
//     caller did not ask for ALL_OLD).
//   - If both would refuse, the fence is reported: the caller's condition is
//     not evaluated here.
//   - An absent item admits any fence, so a failure on an absent item is the
//     caller's condition. This relies on the server honouring ALL_OLD, as
//     DynamoDB and DynamoDB Local do. A write without a condition of its own
//     that fails is the fence's, whatever came back; if no item came back,
//     Current is 0 (unknown).
//   - A fence attribute of the wrong type or out of range refuses every
//     write (DynamoDB compares values of different types as unequal); the
//     error says so and matches neither sentinel.
//
// TransactWriteItems does the same for each item from the
// CancellationReasons of a *types.TransactionCanceledException and names the
// item's index. ConditionCheck items are not fenced; their failures are the
// caller's.
//
// # Deletes and tombstones
//
// DeleteItem is conditional on the fence, but the deleted item takes its
// fence with it: a stale writer that comes later finds no fence and can
// create the item again. Where that matters, use Tombstone: a PutItem, under
// the same condition, that replaces the item with its key, its fence and
// fence_tombstone = true. Stale writers are then refused as before; the
// current term replaces the tombstone with PutItem or brings the item back
// with UpdateItem (which removes the mark). Readers must treat a tombstone as
// absent (IsTombstone), and conditions meant to test that an item exists
// must also test attribute_not_exists(fence_tombstone). Remove tombstones
// (a plain DeleteItem, or a TTL attribute) only once no writer of an older
// term can still be running.
//
// # Assumptions
//
//  1. Every writer of the fenced items goes through a Client with the same
//     attribute names, under one lease.
//  2. The table is in one region. Global tables replicate last-writer-wins
//     between regions, so conditions in two regions can both pass.
//  3. The caller's items do not use the three fence attributes; PutItem
//     refuses an item that sets them, and DynamoDB refuses an
//     UpdateExpression that touches them ("paths overlap").
//
// # Cost
//
// No extra request: the fence rides in the write's own condition. Each write
// is a little larger (two attributes, a few dozen bytes, and the condition),
// which rounds into the same write capacity unit for items well under 1 KB.
// The benchmarks (BenchmarkIntegration*) compare fenced and plain writes
// against DynamoDB Local; docs/fencing.md has the figures. Permissions are the
// write operations themselves: dynamodb:PutItem, UpdateItem, DeleteItem, and
// for transactions the same on every table involved (plus
// dynamodb:ConditionCheckItem for ConditionCheck items).
package dynamofence
