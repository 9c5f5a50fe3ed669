// Package ops holds the operator commands the connect-kinesis binary adds to
// Benthos' own: `connect-kinesis checkpoints show|reset|delete`, which
// inspect and change a consumer group's checkpoints and leases through the
// Redis checkpointer's store operations, and `connect-kinesis consumers
// list|deregister` for the stream consumers of enhanced fan-out. Printing, flags and the Kinesis
// lookups an operator needs live here, so the store stays a store.
package ops
