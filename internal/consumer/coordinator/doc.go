// Package coordinator is the Consumer of the `kinesis` input: one
// coordinator per stream lists shards, holds a child until its parents are
// closed, takes, renews and releases leases, balances shards between the
// group's members (by count or by load), hands shards off, re-seeds a
// store that forgot the group, prunes shards trimmed past retention and
// notices a recreated stream. It starts a reader for each shard it holds
// and sees it through the shardReader interface.
package coordinator
