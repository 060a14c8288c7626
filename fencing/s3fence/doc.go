// Package s3fence fences writes to the caller's own S3 objects: a put
// succeeds only if the object was last written under a fence that admits the
// writer's, and the object then carries the writer's fence in its metadata.
//
//	fc, err := s3fence.New(s3.NewFromConfig(awsCfg), s3fence.Config{})
//	// in OnElected(ctx, term), or below it with ctx passed down:
//	_, err = fc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("reports"), Key: aws.String("daily.json"), Body: bytes.NewReader(b)})
//	if errors.Is(err, fencing.ErrStaleToken) { /* this term is over: stop writing */ }
//
// Client.PutObject has the signature of (*s3.Client).PutObject and reads the
// fence from ctx (fencing.FromContext; tenure puts it in OnElected's
// context).
//
// # How
//
// S3 cannot compare a number in a condition, so each put is a read, a check
// and a conditional write:
//
//  1. HeadObject: the object's ETag and its fence, from the metadata keys
//     fencing-token and fencing-lease (x-amz-meta-fencing-token, ...).
//  2. Check: an object without a fence, or with one of the same lease and a
//     token no higher, admits the write; otherwise the put fails with a
//     *fencing.StaleTokenError or *fencing.WrongLeaseError and sends nothing.
//  3. PutObject with the fence added to the caller's metadata and
//     If-Match: <the ETag read>, or If-None-Match: * if there was no object.
//     If another writer changed the object since step 1, the server answers
//     412 (or 404 to If-Match on an object deleted meanwhile) and the put
//     starts again at step 1; a 409 ConditionalRequestConflict (a
//     conditional write to the key in flight) is retried the same way after a
//     random wait. Config.Attempts bounds the rounds.
//
// # Guarantees
//
//  1. A put is applied only over the very object whose fence admitted it
//     (If-Match on its ETag), or where no object exists (If-None-Match: *).
//  2. So a lower token never overwrites an object written under a higher one,
//     provided that the ETag changes with every write (below).
//  3. The caller's IfMatch and IfNoneMatch are kept, and their failure is
//     reported as the SDK's error, unless the object that made them fail
//     carries a fence that refuses the writer, which is reported instead.
//
// # ETags: bodies must differ from write to write
//
// If-Match compares ETags, and for a plain (single-part, not SSE-KMS) object
// the ETag is the MD5 of its bytes, on AWS as on MinIO and versitygw. The
// fence lives in metadata, which the ETag does not cover. So if a newer
// leader writes exactly the bytes a stale writer saw, or writes other bytes
// and then those bytes again, between that writer's read and its write, the
// ETag the stale writer holds matches again and its write lands, over a
// higher fence (TestIntegrationSameBytesLimit shows it). Make every write's
// body unique: put the token and a sequence number, a write ID or a
// timestamp in it, as most documents with an "updated" field already do.
// Objects encrypted with SSE-KMS or SSE-C have ETags that are not content
// hashes on AWS; do not count on that elsewhere.
//
// # Deletes
//
// S3 has no delete conditional on metadata, and MinIO ignores If-Match on
// DeleteObject, so there is no fenced delete. A deleted object also takes its
// fence with it, so a stale writer could create it again. Tombstone replaces
// the object with an empty one that keeps the fence and carries
// fencing-tombstone: true (IsTombstone); readers must treat it as absent.
//
// # Assumptions
//
//  1. Every writer of the fenced objects goes through a Client, under one
//     lease; objects written otherwise have no fence and admit anyone.
//  2. The server honours If-Match and If-None-Match on PutObject (AWS since
//     November 2024; MinIO and versitygw as tested here). docs/s3.md shows
//     how to check a server.
//  3. Bodies differ from write to write (above).
//  4. The Body is an io.Seeker when a retry may be needed (bytes.Reader,
//     strings.Reader, os.File), so that it can be sent again.
//
// # Cost
//
// One HeadObject before every PutObject: two requests instead of one in the
// common case, and one more round of both each time another writer wins a
// race. With IfNoneMatch "*" no HeadObject is sent. Permissions:
// s3:GetObject (for HeadObject) and s3:PutObject on the objects, and
// s3:ListBucket on the bucket, without which AWS answers HeadObject of a
// missing object with 403 instead of 404 and the first write of a key fails. The benchmarks
// (BenchmarkIntegration*) measure the difference against MinIO and
// versitygw; docs/fencing.md has the figures.
package s3fence
