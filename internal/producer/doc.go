// Package producer writes records to a Kinesis stream the way the `kinesis`
// output promises: it validates each record against the service limits, packs
// records into PutRecords requests of at most 500 records and 5 MiB, sends a
// batch's requests concurrently, retries only the entries Kinesis refused, and
// reports, record by record, what failed for good and why. With aggregation on
// it packs small records bound for the same shard into KPL aggregated records.
package producer
