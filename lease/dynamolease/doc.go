// Package dynamolease is a lease.Store on one Amazon DynamoDB table, built on
// aws-sdk-go-v2. Each lease is one item; every read that decides anything is
// strongly consistent and every write is conditional, so the table itself
// orders the candidates.
//
//	api := dynamodb.NewFromConfig(awsCfg)
//	store, err := dynamolease.New(api, dynamolease.Config{Table: "tenure-leases"})
//
// # Guarantees
//
//  1. Get is one GetItem with ConsistentRead=true: it sees every write that
//     completed before it started (DynamoDB's strongly consistent read of a
//     single item). GetStale (lease.StaleGetter) is one eventually
//     consistent GetItem, at half the read units: followers poll with it.
//  2. Put is one PutItem with a ConditionExpression: attribute_not_exists on
//     the key to create a lease (expect == lease.NoVersion), and an equality
//     test on the stored version for every later write. Of any number of
//     writers that read the same version, at most one succeeds. The store
//     never issues an unconditional write, an UpdateItem or a DeleteItem.
//  3. A failed condition is an error matching lease.ErrConflict. The request
//     asks for ReturnValuesOnConditionCheckFailure=ALL_OLD, so the error is a
//     *lease.ConflictError carrying the record stored at that moment (Found
//     false if there is none) at no extra request or cost.
//  4. A write the SDK retried after a lost response is reported correctly: if
//     the first attempt applied, the retry fails its condition against the
//     item that attempt wrote, whose version Put recognises as the one it
//     minted, and Put returns success. Any other error but a conflict leaves
//     the write's outcome unknown, as lease.Store says; callers read back and
//     compare the Nonce.
//  5. An item that is not a valid record (written by hand or by another
//     program) is never read as a lease that can be taken over: Get returns a
//     *lease.RecordError naming the lease and the field, and a Put expecting
//     NoVersion conflicts with it. Decoding is strict about the attributes
//     below (presence, type, range) and then applies Record.Validate.
//     Attributes it does not know are ignored.
//
// Use a table in one region. A global table with multi-region eventual
// consistency replicates items last-writer-wins, so conditional writes in two
// regions can both succeed, which would make two leaders.
//
// # The table
//
// One partition key of type S, named by Config.KeyAttribute (default
// "lease"), and no sort key; any billing mode. CreateTable makes one with
// on-demand billing. The table may be shared by many leases and by several
// programs, one item per lease name. An item holds:
//
//	lease        S     the lease name (the key; attribute name configurable)
//	holder       S     Record.Holder
//	token        N     Record.Token, decimal, 1 to 2^63-1
//	duration_ns  N     Record.Duration in nanoseconds
//	released     BOOL  Record.Released
//	nonce        S     Record.Nonce
//	written_at   S     Record.WrittenAt, RFC 3339 in UTC with nanoseconds; absent when zero
//	payload      B     Record.Payload; absent when empty
//	version      S     the store's version of the item (below)
//	<TTL>        N     epoch seconds, only with Config.TTLAttribute (below)
//
// # Versions
//
// Every Put mints a new version, 130 random bits from crypto/rand written as
// 26 characters, and stores it in the item; the version Get and Put return is
// that attribute. A version is not the record's Nonce, although the nonce is
// unique to each write too: the lease.Store contract requires a new version
// even when a caller writes the same record (nonce included) twice, and a
// store that minted its own cannot be led into reusing one by a caller's
// mistake. Nor is it a counter, which would start again at 1 if the item were
// deleted and so could repeat a version (ABA). A random version cannot.
//
// # Fencing tokens
//
// The store does not count tokens: the caller writes Record.Token = previous
// + 1 in the Put that acquires the lease, expecting the version it read the
// previous token with. Because the write is conditional on that version, only
// one writer can follow each version, so each token value is claimed by at
// most one term, and renewals and release keep it. A server-side counter (an
// UpdateItem with ADD) would cost a second kind of request and a second
// permission and buy nothing: the conditional write already serialises every
// writer of the item. Tokens last as long as the item; the item is never
// deleted by this package, only by DynamoDB TTL if you turn it on.
//
// # TTL (off by default)
//
// With Config.TTLAttribute set, every write also stores in that attribute the
// writer's wall-clock time plus the record's Duration plus Config.TTLSlack
// (default 7 days), in epoch seconds, and CreateTable turns on DynamoDB Time
// to Live for it. DynamoDB then deletes the items of leases that nobody has
// written for that long. Deletion is lazy (typically within days of the
// expiry, and an expired item can still be read until then), which is why
// the slack must lie far past the lease: a live lease is rewritten every few
// seconds, so its TTL keeps moving ahead and it is never deleted. The slack
// also absorbs error in the writers' wall clocks, which DynamoDB compares
// with its own.
//
// The cost is the fencing token's history. A deleted item takes its token
// with it: the next candidate finds no record and creates one, with a token
// of at least its wall time in Unix milliseconds, which is above the tokens
// of earlier terms unless its clock is far behind the one that first created
// the lease. A fenced resource that remembers a higher token would refuse
// the new leader. Enable TTL only for leases that are truly abandoned (no
// candidate runs for the slack, 7 days by default), or if nothing checks
// the tokens. That is why TTL is opt-in. Turn on the table's deletion
// protection, and never restore a lease table from a backup or
// point-in-time recovery: restored records hand out old tokens to
// candidates that never saw the later ones (candidates that did wait them
// out and mint above). Without it, an abandoned lease costs one small item
// of storage (a fraction of a cent a month) and its tokens never go back.
//
// # Errors
//
// Errors name the operation and the lease (get lease "x": ...). A missing
// record matches lease.ErrNotFound, a failed condition lease.ErrConflict,
// an invalid stored item lease.ErrInvalidRecord, a missing table
// ErrTableNotFound (and names the table), and a cancelled or expired context
// context.Canceled or context.DeadlineExceeded. Put rejects an invalid name or
// record, and Get an invalid name, before sending anything.
//
// # Permissions and cost
//
// A Store needs dynamodb:GetItem and dynamodb:PutItem on the table;
// CreateTable needs dynamodb:CreateTable, dynamodb:DescribeTable and, with TTL,
// dynamodb:DescribeTimeToLive and dynamodb:UpdateTimeToLive. docs/dynamodb.md
// in the repository has the policy, the AWS CLI equivalent of CreateTable and
// the cost of one lease per month. A record of the usual size (under 1 KB)
// costs one write request unit per Put and one read request unit per Get,
// conflicts included.
package dynamolease
