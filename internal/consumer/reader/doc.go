// Package reader reads one leased shard: it opens the shard's record
// source, converts its records (KPL de-aggregation, the hash-range rule
// for stray aggregates), hands them to the pipeline in batches (or through
// lanes by partition key), sends nacked batches again (in parts, isolating
// the records that fail, and writing those out of attempts or age to the
// dead letter), follows acks in a tracker, commits the highest
// contiguously done position under the lease, and at the end closes the
// shard or hands its lease back. Its coordinator gives it a Stream, which
// is also its only way back.
package reader
