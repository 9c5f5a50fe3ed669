// Package source holds the record sources of a shard: GetRecords polling
// and SubscribeToShard (enhanced fan-out) through the stream's consumer,
// which it registers or resolves. A source yields a shard's records in
// order from where it was told to start (Start), retries its own trouble
// with failsafe-go, and fills only the Room it is given: it reserves room
// right before each call that returns records and gives it back when the
// call fails. NotFound tells a trimmed shard from a deleted or recreated
// stream.
package source
