// Package consumer reads Kinesis shards for the `kinesis` input: it discovers
// shards and their lineage, reads a child shard only after its parents are
// closed, reads each shard with paced GetRecords polling or enhanced fan-out
// (SubscribeToShard), tracks Benthos acks so a checkpoint
// only ever moves to the highest contiguously acked record, and shares the
// shards of a stream between instances through leases held in a Store.
//
// The package knows the Store only through a narrow interface, so its logic
// is tested with fakes; the Redis checkpointer (plugins/checkpointer)
// implements it with the types defined here (store.go, position.go).
//
// One coordinator runs each stream: coordinator.go is its loop, and its
// concerns have a file each: discovery.go (listing shards), lineage.go (the
// gate that holds a child until its parents are closed), leases.go (take,
// renew, stop before a lease can run out), balance.go and handoff.go (fair
// shares between instances), start.go (where a shard without a checkpoint
// starts), recreated.go (a stream deleted and created again), reseed.go (a
// store that forgot the group). Each shard it holds is read by a shardReader
// (reader.go) from a RecordSource: source.go describes that seam and holds
// what the sources share, polling.go is the GetRecords source,
// subscription.go (with subscription_endcheck.go) the enhanced fan-out one,
// reading through the stream consumer of efo_consumer.go and
// efo_resolve.go; hashrange.go is KCL's range rule for stray aggregates;
// delivery.go, redeliver.go, commit.go and tracker.go are the path from a
// record to its committed checkpoint that every source shares, and finish.go
// how a reader ends: the shard closed, or its lease handed back.
package consumer
