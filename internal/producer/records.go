package producer

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// records is a list of Kinesis records to send, as parallel slices so that
// a request is a sub-slice and costs no copy.
type records struct {
	// src is the entries of the write; index and members point into it.
	src     []Entry
	entries []types.PutRecordsRequestEntry
	// index is the entry a plain record carries, or the first member of an
	// aggregate.
	index []int
	// members is nil without aggregation; otherwise the entries each
	// aggregate carries (nil for plain records).
	members [][]int
	// shards is the map the records were grouped by, nil if none; lane is
	// then the index of the open shard each record is predicted to land on
	// (-1 if the map does not know).
	shards *ShardMap
	lane   []int
	// refusals is Kinesis' last refusal of each record, set on records
	// waiting for a retry.
	refusals []*RecordError
}

func (r *records) len() int { return len(r.entries) }

// size is what Kinesis counts for record k: data plus partition key.
func (r *records) size(k int) int {
	return len(r.entries[k].Data) + len(aws.ToString(r.entries[k].PartitionKey))
}

// count is the number of user records record k carries.
func (r *records) count(k int) int {
	if r.members == nil || r.members[k] == nil {
		return 1
	}
	return len(r.members[k])
}

// keysIn is the number of entries the records ks carry, which bounds the
// partition keys they hold.
func (r *records) keysIn(ks []int) int {
	if r.members == nil {
		return len(ks)
	}
	n := 0
	for _, k := range ks {
		n += r.count(k)
	}
	return n
}

// each calls fn with the index of every entry record k carries.
func (r *records) each(k int, fn func(int)) {
	if r.members == nil || r.members[k] == nil {
		fn(r.index[k])
		return
	}
	for _, i := range r.members[k] {
		fn(i)
	}
}

// predicted is the id of the shard record k was grouped for, or "".
func (r *records) predicted(k int) string {
	if r.shards == nil || r.lane[k] < 0 {
		return ""
	}
	return r.shards.ranges[r.lane[k]].id
}

func (r *records) slice(from, to int) records {
	s := records{src: r.src, shards: r.shards, entries: r.entries[from:to], index: r.index[from:to]}
	if r.members != nil {
		s.members = r.members[from:to]
	}
	if r.lane != nil {
		s.lane = r.lane[from:to]
	}
	return s
}

// withCap returns an empty list of r's records with room for n.
func (r *records) withCap(n int) records {
	s := records{src: r.src, shards: r.shards, entries: make([]types.PutRecordsRequestEntry, 0, n), index: make([]int, 0, n)}
	if r.members != nil {
		s.members = make([][]int, 0, n)
	}
	if r.lane != nil {
		s.lane = make([]int, 0, n)
	}
	return s
}

// push appends record k of src.
func (r *records) push(src *records, k int) {
	r.src, r.shards = src.src, src.shards
	r.entries = append(r.entries, src.entries[k])
	r.index = append(r.index, src.index[k])
	if src.members != nil {
		r.members = append(r.members, src.members[k])
	}
	if src.lane != nil {
		r.lane = append(r.lane, src.lane[k])
	}
}

// add appends record k of src, refused with refusal.
func (r *records) add(src *records, k int, refusal *RecordError) {
	r.push(src, k)
	r.refusals = append(r.refusals, refusal)
}

// requestFill is how full the request being packed is; full tells whether
// a record of size bytes must start the next request. It is the one
// packing rule of the producer: at most 500 records and 5 MiB a request.
type requestFill struct{ records, bytes int }

func (f *requestFill) full(size int) bool {
	return f.records == kinesisx.MaxPutRecordsCount || (f.records > 0 && f.bytes+size > kinesisx.MaxPutRecordsBytes)
}

func (f *requestFill) add(size int) { f.records++; f.bytes += size }

// pack splits records, in order, into requests within the PutRecords limits.
func pack(recs *records) []records {
	var (
		requests []records
		from     int
		fill     requestFill
	)
	for k := range recs.len() {
		size := recs.size(k)
		if fill.full(size) {
			requests = append(requests, recs.slice(from, k))
			from, fill = k, requestFill{}
		}
		fill.add(size)
	}
	if recs.len() > from {
		requests = append(requests, recs.slice(from, recs.len()))
	}
	return requests
}
