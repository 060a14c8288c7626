// Package fencing orders the writes of successive leaders, so that a leader
// paused past its lease cannot overwrite what a newer leader wrote.
//
// A lease only protects what nodes believe. A leader that stops for longer
// than its lease (a GC pause, a suspended VM, a stalled disk) still sends the
// write it was about to send when it wakes, after another node has taken the
// lease and started writing. Timeouts cannot prevent this: the pause can fall
// between any check and the write. Only the resource can, by comparing what
// each write carries.
//
// Every leadership term carries a Token minted by the lease store inside the
// write that acquires the lease, as the previous term's token + 1; renewals
// keep it. So tokens strictly increase from term to term, and a higher token
// always belongs to a later term. A fenced resource remembers, per lease, the
// highest token it has accepted and refuses every lower one.
//
// # What this package and its subpackages provide
//
//   - Fence (a lease name and a token), NewContext and FromContext: tenure
//     puts the term's Fence in the context it passes to OnElected, so the code
//     that writes, however deep, can present it.
//   - Guard: a fenced resource inside one process.
//   - fencing/httpfence: a client RoundTripper that sends the fence in
//     headers, and server middleware that checks it with a Guard.
//   - fencing/dynamofence: PutItem, UpdateItem, DeleteItem and
//     TransactWriteItems on the caller's own DynamoDB tables, conditional on
//     the fence stored in each item.
//   - fencing/s3fence: PutObject on the caller's own objects, conditional on
//     the fence stored in each object's metadata.
//   - fencing/sqlfence: fenced UPDATE, upsert and DELETE statements for SQL
//     databases (docs/fencing.md has the pattern).
//
// # Guarantees
//
//  1. A fenced resource accepts a write with token t for lease L only if it
//     has accepted no write with a token higher than t for L, and it then
//     remembers t. The check and the write are one atomic step: a Guard holds
//     a lock across both, the remote helpers make the store evaluate both in
//     one conditional request.
//  2. Equal tokens are accepted: the writes of one term all carry its token.
//  3. A refused write changes nothing and is reported as a *StaleTokenError
//     (errors.Is(err, ErrStaleToken)) that names the token presented and,
//     where the resource says, the one it has accepted.
//
// # Assumptions and the caller's duties
//
//  1. Present the term's own fence (from the OnElected context, or
//     Term.Fence) with every write, and never a fence read from the store or
//     remembered from an earlier term.
//  2. Route every write to the resource through a fenced path. One unfenced
//     writer defeats the scheme for everyone.
//  3. Use one lease per resource. Tokens of different leases are unrelated;
//     the remote helpers store the lease name with the token and refuse a
//     write under another lease (*WrongLeaseError).
//  4. Tokens must never go back. The lease stores never delete a record (a
//     release keeps the token). If a record is deleted anyway (by hand, by
//     dynamolease's opt-in TTL, by a lifecycle rule), the candidate that
//     creates it again mints a token of at least its wall time in Unix
//     milliseconds, above the old ones unless its clock is far behind; a
//     record written back from a backup is waited out by every candidate
//     that saw a higher token. A fenced resource that ever sees a token go
//     back refuses the new leader until its fence is cleared.
//  5. Fencing orders writes; it does not make a late write fresh. A zombie's
//     write that arrives before the new leader's first write is accepted,
//     as it would be had it come a moment earlier. What fencing rules out is
//     a write from an older term landing after a write from a newer one.
package fencing
