// Package checkpointer owns every Redis key and Lua script of connect-kinesis:
// shard checkpoints, fenced leases, the closed-shard set that gates children,
// instance membership and hand-off requests. The kinesis input uses it; the
// `connect-kinesis checkpoints` command inspects and resets it.
package checkpointer
