// Package consumer holds the types the Kinesis reader's rooms share, and
// that the checkpointer and the input see of it: the parsed Config, a user
// Record, a Batch handed to the pipeline (its Ack goes back to the reader
// through Delivery), the Store interface with Position, Lease and Take, a
// listed Shard with its HashRange, the consumer's Metrics, and the rules of
// the group check.
//
// The reading itself is split into four rooms, each a sub-package that
// imports only rooms below it:
//   - coordinator: the Consumer the input starts, one coordinator per
//     stream (discovery, the lineage gate, leases, balancing, hand-off,
//     re-seed, prune, recreated streams, start positions);
//   - reader: one leased shard's reader, from a record source to the
//     committed checkpoint (delivery, lanes, redelivery, the ack tracker,
//     commits, the finish);
//   - source: record sources (GetRecords polling, SubscribeToShard with
//     enhanced fan-out and its stream consumer);
//   - budget: the input's byte budget (max_buffered_bytes).
//
// consumertest holds the fakes every room's tests use. docs/architecture.md
// draws the rooms and the calls between them.
package consumer
