// Package input registers the `kinesis` batch input: it reads every shard of
// one or more Kinesis streams in per-shard order, advances Redis checkpoints
// only through Benthos acks, shares shards across instances with Redis leases
// and reads a child shard only after its parents are closed.
//
// Import it for its side effect to add the input to a Benthos binary:
//
//	import _ "github.com/connect-kinesis/connect-kinesis/plugins/input"
package input
