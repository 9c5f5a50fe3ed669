// Package producer writes records to a Kinesis stream the way the `kinesis`
// output promises: it validates each record against the service limits, packs
// records into PutRecords requests of at most 500 records and 5 MiB, retries
// only the entries Kinesis refused, and reports, record by record, what
// failed for good and why. With aggregation on it packs small records bound
// for the same shard into KPL aggregated records, and sends again, grouped
// by a fresh shard map, the members of an aggregate that landed on a shard
// not holding all of them.
//
// Unordered, a write's requests are sent concurrently. Ordered (the output's
// default), each partition key's records land in the order of the entries:
// records are grouped by shard and sent in rounds; a round takes each
// shard's next records, holding a key at most once, packs them into as few
// requests as the limits allow (several shards per request), sends those in
// parallel, and retries refused records before the next round. Ordered
// writes may overlap: each takes its place when it begins (Reserve), and a
// record whose key an earlier write in flight holds waits for that write to
// end (sequence.go).
package producer
