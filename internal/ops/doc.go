// Package ops holds the operator commands the connect-kinesis binary adds to
// Benthos' own: `connect-kinesis checkpoints show|reset|delete|export|import`,
// which inspect and change a consumer group's checkpoints and leases through
// the Redis checkpointer's store operations, and carry checkpoints over from
// Redpanda Connect's or the KCL's DynamoDB tables; and `connect-kinesis
// consumers list|deregister` for the stream consumers of enhanced fan-out.
// Printing, flags and the Kinesis and DynamoDB lookups an operator needs live
// here, so the store stays a store.
package ops
