// Package checkpointer owns every Redis key and Lua script of connect-kinesis:
// shard checkpoints, fenced leases, the closed-shard set that gates children,
// instance membership and hand-off requests. The kinesis input uses it; the
// operator command `connect-kinesis checkpoints` (package internal/ops) reads
// and resets it through the store operations here. It holds no CLI code.
package checkpointer
