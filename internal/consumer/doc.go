// Package consumer reads Kinesis shards for the `kinesis` input: it discovers
// shards and their lineage, reads a child shard only after its parents are
// closed, paces GetRecords per shard, tracks Benthos acks so a checkpoint
// only ever moves to the highest contiguously acked record, and shares the
// shards of a stream between instances through leases held in a Store.
//
// The package knows the Store only through a narrow interface, so its logic
// is tested with fakes; the Redis checkpointer (plugins/checkpointer)
// implements it with the types defined here.
package consumer
