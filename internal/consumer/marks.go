package consumer

import "context"

// The redelivery mark (docs/poison-records.md): an owner stores how far it
// may deliver each shard before it hands those records to the pipeline, so
// any later owner of the shard that reads them again marks them
// (Batch.Redelivered), also after a crash, a lost lease or a store that
// forgot.

// Marker stores, for one instance's shards of one stream, how far each may
// be delivered.
type Marker interface {
	// Ask starts storing that l's shard may be delivered up to p and
	// returns the channel its answer comes on: nil once a write storing it
	// succeeded (or an earlier write covered it), an error wrapping
	// ErrLeaseLost when the lease is fenced (deliver nothing more under
	// it). While the store cannot be written no answer comes: records no
	// write covers are not delivered. The caller waits for the answer
	// before it hands over a record up to p, and may do other work first.
	Ask(l Lease, p Position) <-chan error
	// Found returns the highest mark a write under l's token found stored
	// for its shard before it wrote, above this instance's own writes under
	// that token (which may cover records not handed over yet), zero when
	// none. The caller raises
	// the mark it delivers against to it once an ask is answered nil: a
	// re-seed may have won the shard back from another owner that
	// delivered past the take's mark, and the re-seed's reply may have
	// been lost.
	Found(l Lease) Position
	// Forget drops what is known of a shard the instance no longer reads.
	Forget(shard string)
	// WriteBack writes again, each only forwards, every mark this instance
	// wrote or read at a take of the stream's shards: a stop that leaves
	// leases to lapse calls it, so a store that forgot the group meanwhile
	// still has them for the shards' next owners.
	WriteBack(ctx context.Context) error
}

// MarkingStore is a Store that keeps redelivery marks: its takes fill
// Take.Delivered, and Marks starts owner's Marker, which writes until ctx
// ends.
type MarkingStore interface {
	Store
	Marks(ctx context.Context, owner string) Marker
}
