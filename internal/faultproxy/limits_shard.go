package faultproxy

import (
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Per-shard limits of Kinesis Data Streams (provisioned mode).
const (
	ShardReadsPerSecond     = kinesisx.MaxGetRecordsPerSecond
	ShardReadBytesPerSecond = 2 << 20
	ShardRecordsPerSecond   = 1000
	ShardWriteBytesPerSec   = 1 << 20
)

// Limits switches on the per-shard limits of a Front. Over a limit, a
// GetRecords call is answered 400 ProvisionedThroughputExceededException and
// a PutRecords entry is refused (not written) with that error code in its
// result, as the service does. Windows are one second, sliding.
type Limits struct {
	// Reads enforces 5 GetRecords calls/s and 2 MiB/s read per shard. The
	// shard of a call is known from the iterator it uses, learnt from
	// GetShardIterator and earlier GetRecords answers.
	Reads bool
	// Writes enforces 1,000 records/s and 1 MiB/s (data plus partition key)
	// per shard. The shard of an entry is its hash key (explicit, or the MD5
	// of its partition key) against the stream's open shards.
	Writes bool
	// ReadsPerSecond, ReadBytesPerSecond, RecordsPerSecond and
	// WriteBytesPerSecond override the service's values when positive, so a
	// test reaches a limit with little data.
	ReadsPerSecond, ReadBytesPerSecond, RecordsPerSecond, WriteBytesPerSecond int
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (l Limits) readsPerSecond() int { return orDefault(l.ReadsPerSecond, ShardReadsPerSecond) }
func (l Limits) readBytesPerSecond() int {
	return orDefault(l.ReadBytesPerSecond, ShardReadBytesPerSecond)
}
func (l Limits) recordsPerSecond() int { return orDefault(l.RecordsPerSecond, ShardRecordsPerSecond) }
func (l Limits) writeBytesPerSecond() int {
	return orDefault(l.WriteBytesPerSecond, ShardWriteBytesPerSec)
}

// SetLimits installs the per-shard limits; the zero value removes them.
func (f *Front) SetLimits(l Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = l
}

func (f *Front) limitsOn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limits.Writes
}

// stamp is one event in a window: a call or a record, with its bytes.
type stamp struct {
	at    time.Time
	bytes int
}

// shardWindow holds one shard's events of the last second.
type shardWindow struct {
	reads, readBytes, writes []stamp
}

func (f *Front) windowLocked(shard string) *shardWindow { return entryOf(f.shards, shard) }

// prune drops the events older than one second before now.
func prune(s []stamp, now time.Time) []stamp {
	i := 0
	for i < len(s) && now.Sub(s[i].at) >= time.Second {
		i++
	}
	return s[i:]
}

func sum(s []stamp) int {
	n := 0
	for _, e := range s {
		n += e.bytes
	}
	return n
}

func (w *shardWindow) allowRead(now time.Time, calls, bytesPerSec int) bool {
	w.reads, w.readBytes = prune(w.reads, now), prune(w.readBytes, now)
	if len(w.reads) >= calls || sum(w.readBytes) >= bytesPerSec {
		return false
	}
	w.reads = append(w.reads, stamp{at: now})
	return true
}

// unread takes back the last call allowed.
func (w *shardWindow) unread() {
	if n := len(w.reads); n > 0 {
		w.reads = w.reads[:n-1]
	}
}

func (w *shardWindow) addReadBytes(now time.Time, n int) {
	w.readBytes = append(w.readBytes, stamp{at: now, bytes: n})
}

func (w *shardWindow) allowWrite(now time.Time, size, records, bytesPerSec int) bool {
	w.writes = prune(w.writes, now)
	if len(w.writes)+1 > records || sum(w.writes)+size > bytesPerSec {
		return false
	}
	w.writes = append(w.writes, stamp{at: now, bytes: size})
	return true
}
