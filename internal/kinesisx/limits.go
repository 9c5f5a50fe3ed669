// Package kinesisx holds what every Kinesis-facing part of connect-kinesis
// shares: the service limits as named constants, the one error classifier that
// decides what is retried, and the failsafe-go retry policies built from the
// standard `max_retries` and `backoff` fields.
package kinesisx

import "time"

// Service limits of Kinesis Data Streams, from the AWS documentation. They are
// constants so that packing, pacing and validation all name the same number.
const (
	// MaxPutRecordsCount is the most records one PutRecords request may carry.
	MaxPutRecordsCount = 500
	// MaxPutRecordsBytes is the most bytes (data plus partition keys) one
	// PutRecords request may carry.
	MaxPutRecordsBytes = 5 << 20
	// DefaultMaxRecordSize is the default size limit of one record, counting
	// its data and its partition key.
	DefaultMaxRecordSize = 1 << 20
	// MaxRecordSizeLimit is the largest record size a stream can be raised to
	// with UpdateMaxRecordSize.
	MaxRecordSizeLimit = 10 << 20
	// MaxPartitionKeyLength is the most Unicode characters of a partition key.
	MaxPartitionKeyLength = 256

	// MaxGetRecordsPerSecond is the polling read limit per shard.
	MaxGetRecordsPerSecond = 5
	// MinPollInterval is the shortest interval between two GetRecords calls
	// of one shard that stays within MaxGetRecordsPerSecond.
	MinPollInterval = time.Second / MaxGetRecordsPerSecond
	// MaxGetRecordsLimit is the most records one GetRecords call may return.
	MaxGetRecordsLimit = 10000
	// MaxReadBytesPerSecond is the polling read throughput per shard.
	MaxReadBytesPerSecond = 2 << 20

	// MaxWriteRecordsPerSecond and MaxWriteBytesPerSecond are the write
	// limits per shard.
	MaxWriteRecordsPerSecond = 1000
	MaxWriteBytesPerSecond   = 1 << 20

	// IteratorTTL is how long a shard iterator stays valid after issue.
	IteratorTTL = 5 * time.Minute
)

// MaxHashKey is 2^128 - 1 written in decimal: the largest explicit hash key.
const MaxHashKey = "340282366920938463463374607431768211455"
