// Package s3lease is a lease.Store that keeps each lease in one object of an
// Amazon S3 bucket, or of an S3-compatible server that implements conditional
// writes (tested against versitygw and MinIO), and does compare-and-swap with
// the HTTP preconditions If-None-Match and If-Match on PutObject.
//
// It needs two permissions on the lease objects, s3:GetObject and
// s3:PutObject, and s3:ListBucket on the bucket so that a missing lease reads
// as not found rather than access denied. docs/s3.md in the repository has the
// IAM policy, the bucket setup and what a lease costs per month.
//
// # Objects
//
// The lease named name lives at the key
//
//	Config.Prefix + name, with every "/" in name written as "%2F"
//
// (see Store.Key), so "app/cron" under the prefix "tenure/" is the object
// "tenure/app%2Fcron". Every lease is one flat object under the prefix because
// file-backed servers store keys as paths: with "/" kept, lease "a" would
// need "a" to be a file and lease "a/b" a directory (versitygw refuses the
// second with 409 ObjectParentIsFile), and names with "//", "." or ".."
// segments, which lease.ValidateName allows, would be refused (MinIO) or
// silently collapsed into another lease's key (versitygw stores "a/../b" as
// "b"). Lease names never contain '%', so the mapping is one-to-one.
//
// The body is one line of JSON, schema version 1:
//
//	{"v":1,"holder":"host-1","token":7,"duration_ns":10000000000,"released":false,
//	 "nonce":"n-1","written_at":"2025-03-14T09:39:26.535897932Z",
//	 "payload":"YWRkcg==","write_id":"00112233445566778899aabbccddeeff"}
//
//	v            schema version, the number 1
//	holder       lease.Record.Holder, a string
//	token        lease.Record.Token, an integer (1 to 2^63-1)
//	duration_ns  lease.Record.Duration in nanoseconds, an integer
//	released     lease.Record.Released, true or false
//	nonce        lease.Record.Nonce, a string
//	written_at   lease.Record.WrittenAt, RFC 3339 with nanoseconds, in UTC
//	payload      lease.Record.Payload, standard base64; left out when empty
//	write_id     32 random hex digits drawn for each Put; its value is unused
//
// Numbers are written and parsed as decimal text, never through float64, so
// every token up to 2^63-1 and every duration reads back exactly. The object's
// Content-Type is application/json.
//
// # Versions
//
// A lease.Version is the object's ETag exactly as the server sends it, quotes
// included, and Put hands it back unchanged in If-Match. For a single-part PUT
// without SSE-KMS or SSE-C the ETag is the MD5 of the body; with those it is
// opaque. Either way versions never repeat for a lease, because no two writes
// store the same bytes: the body holds the caller's nonce, unique to the
// write, and the write_id that Store draws afresh for every Put, so that even
// a caller who writes one record twice gets a new version (lease/leasetest
// checks this).
//
// # Writes
//
// Put creates a lease with If-None-Match: * and replaces it with
// If-Match: <ETag of the expected version>. Amazon S3 has taken
// If-None-Match on PutObject since August 2024 and If-Match since November
// 2024. What comes back is mapped as follows:
//
//   - 200: the new version is the ETag in the response.
//   - 412 PreconditionFailed (the key exists although a create was asked, or
//     its ETag is not the expected one): an error wrapping lease.ErrConflict
//     made by lease.Conflict. S3 does not say what is stored instead, so it is
//     never a *lease.ConflictError; the caller reads the record if it needs it.
//   - 404 NoSuchKey to an If-Match write (the object is gone; MinIO and
//     versitygw answer this way): a conflict too.
//   - 409 ConditionalRequestConflict (another conditional write to the same
//     key was in flight, so this one was not applied): sent again after a
//     random wait ("full jitter") bounded by Config.ConflictBackoff, doubling
//     with each retry up to 1s, at most Config.ConflictAttempts times in all
//     and never past ctx. A Put still answered 409 after the last attempt
//     returns an error that is not a conflict.
//   - Anything else, including other 409s (versitygw's ObjectParentIsFile),
//     is returned wrapped with the lease name, bucket and key.
//
// Put turns the SDK's own retries off for PutObject (Options.RetryMaxAttempts
// = 1, per call). The SDK would resend a write after a reset connection or a
// 5xx; if the first send had been applied, the second would fail its
// precondition against the caller's own write and come back as a false
// conflict. Without the retry the caller gets an error that is not a conflict,
// which the lease.Store contract tells it to resolve by reading the record
// back and comparing its nonce. Reads keep the SDK's retries.
//
// Put never sends If-Match: * or a list of ETags, which would match any object
// (MinIO overwrites whatever is stored when told If-Match: *); such a version
// is a conflict without a request.
//
// Store never deletes an object and needs no conditional delete: release is a
// Put with Released set that keeps the token, as the lease.Store contract
// says, so tokens never go back. A delete would lose the token's history (a
// lost record: see the tenure package doc), and MinIO ignores If-Match on DeleteObject, so
// a "conditional" delete there could remove a record another node had just
// written.
//
// # Reads
//
// Get is one GetObject; S3 reads are strongly consistent, so it sees every Put
// that returned before it started. A missing object (404 NoSuchKey) is an
// error wrapping lease.ErrNotFound. Without s3:ListBucket AWS answers a missing
// object with 403 AccessDenied, which Get returns as an error saying so.
//
// # Strict decoding
//
// Get returns a record only from an object that is exactly a valid record.
// Anything else is a *lease.RecordError (matching lease.ErrInvalidRecord) that
// names the lease and the field, and no version, so a caller cannot overwrite
// the object by CAS either: a bad object stops the lease until a person
// replaces it (with a valid record, or by deleting it: tenure release --force
// NAME does), and is never taken
// over silently. The rules, with the RecordError Field each break gives:
//
//   - "body": the object is over 8 KiB. A Content-Length over
//     the cap is refused without reading; otherwise at most 8 KiB + 1
//     bytes are read.
//   - "json": the body is not JSON, is not one JSON object, or has a key the
//     schema does not know. Keys match exactly, case included.
//   - "v": the schema version is missing, not a number, or not 1.
//   - holder, token, duration, released, nonce, written_at: the key is
//     missing, repeated or of the wrong type (a token or duration written as a
//     string, a fraction, an exponent), a number is out of range (a negative
//     token or duration), or the record breaks lease.Record.Validate (an empty
//     holder, a zero token, a duration below lease.MinDuration).
//   - payload: not standard padded base64, or over lease.MaxPayloadLen bytes.
//   - write_id: not a string.
//
// Unknown keys are refused, not ignored. A reader that skipped a key it did
// not understand would act on a record whose meaning it does not know, and its
// next write would drop the key. Forward compatibility goes through "v"
// instead: a change that an older reader could misread gets a new schema
// version, and a fleet moves to it in two steps: first every node learns to
// read both versions, then nodes start writing the new one.
//
// Put checks the record with lease.Record.Validate, and that WrittenAt has a
// year RFC 3339 can hold (0000 to 9999), before it sends anything.
//
// # Clients
//
// The caller builds the S3 client and passes it to New; Store uses
// only GetObject and PutObject (the API interface). For AWS:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	store, err := s3lease.New(s3.NewFromConfig(cfg), s3lease.Config{Bucket: "my-leases", Prefix: "tenure/"})
//
// For an S3-compatible server (MinIO, versitygw, Ceph RGW, ...), set its
// endpoint, address buckets by path (the bucket is not a DNS name there), and
// compute and check checksums only when an operation requires them. Since
// service/s3 v1.73.0 (January 2025) the SDK adds a CRC32 checksum to every
// PutObject by default (RequestChecksumCalculation WhenSupported); the
// versitygw and MinIO releases tested here accept it, but older and other
// servers reject or mishandle it, and a lease object is too small to gain
// from it:
//
//	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
//		o.BaseEndpoint = aws.String("http://minio.internal:9000")
//		o.UsePathStyle = true
//		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
//		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
//	})
//
// The server must honour If-None-Match: * and If-Match on PutObject. One that
// ignores them makes every write unconditional and gives no safety at all;
// check a server before trusting it (docs/s3.md shows how).
package s3lease
