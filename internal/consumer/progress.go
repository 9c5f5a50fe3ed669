package consumer

import (
	"time"
)

// Progress is how far a shard's reader has come and how busy the shard is,
// as its owner publishes it with each lease renewal for `checkpoints show`
// and balancing by load: never per record, so it
// costs one store call per instance per renewal.
type Progress struct {
	// LagMillis is the MillisBehindLatest of the shard's latest GetRecords
	// answer, or the age of a failed record the shard waits for when that
	// is larger (kinesis_input_millis_behind_latest).
	LagMillis int64
	// LastDelivered is when the reader last handed a batch to the pipeline
	// (zero if it has not yet).
	LastDelivered time.Time
	// BytesPerSecond is the rate of record data first delivered from the
	// shard since the previous publish: the shard's load, which balancing
	// by load (lease.balance: load) weighs shards by.
	BytesPerSecond int64
}
