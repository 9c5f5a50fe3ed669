package kinesisx

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithytime "github.com/aws/smithy-go/time"
)

// getRecord is one record of a GetRecords answer as found in the body: its
// strings are slices of the body, copied out once the whole answer is read.
type getRecord struct {
	key, seq, data, encryption string
	hasKey, hasSeq, hasData    bool
	arrival                    string // the number as written, "" if absent
}

// decodeGetRecordsOutput fills out from the JSON answer body and reports
// whether it could; on false, out may hold part of the answer. An answer
// with child shards (a shard's last) is left to the SDK.
//
// Each record's data gets its own slice, as from the SDK, so a message kept
// by the pipeline holds only its own bytes; the records' keys, sequence
// numbers and the pointers to them share one allocation per answer.
func decodeGetRecordsOutput(body []byte, out *kinesis.GetRecordsOutput) bool {
	// The scanner reads the body in place: nothing it returns is kept past
	// this function, as every string is copied out below.
	d := jsonScanner{s: unsafe.String(unsafe.SliceData(body), len(body))}
	var (
		recs      []getRecord
		sawRecs   bool
		next      string
		hasNext   bool
		behind    int64
		hasBehind bool
		children  bool
	)
	ok := d.object(func(key string) bool {
		switch key {
		case "Records":
			sawRecs = true
			recs = make([]getRecord, 0, strings.Count(d.s, `"SequenceNumber"`))
			return d.array(func() bool {
				var r getRecord
				if !d.object(func(key string) bool {
					var ok bool
					switch key {
					case "Data":
						r.data, ok = d.string()
						r.hasData = ok
					case "PartitionKey":
						r.key, ok = d.string()
						r.hasKey = ok
					case "SequenceNumber":
						r.seq, ok = d.string()
						r.hasSeq = ok
					case "EncryptionType":
						r.encryption, ok = d.string()
					case "ApproximateArrivalTimestamp":
						r.arrival, ok = d.number()
					default:
						ok = false // a field this codec does not know: the SDK reads the answer
					}
					return ok
				}) {
					return false
				}
				recs = append(recs, r)
				return true
			})
		case "NextShardIterator":
			if d.literal("null") {
				return true
			}
			var ok bool
			next, ok = d.string()
			hasNext = ok
			return ok
		case "MillisBehindLatest":
			n, ok := d.number()
			if !ok {
				return false
			}
			v, err := strconv.ParseInt(n, 10, 64)
			behind, hasBehind = v, err == nil
			return err == nil
		case "ChildShards":
			// Only an empty list is read here; the SDK reads shards.
			children = true
			return d.next('[') && d.next(']')
		}
		return false // a field this codec does not know: the SDK reads the answer
	})
	d.space()
	if !ok || d.i != len(d.s) {
		return false
	}

	// Copy the strings out: one string for all keys and sequence numbers,
	// and one array of strings for the pointers to point at.
	size := 0
	for i := range recs {
		size += len(recs[i].key) + len(recs[i].seq)
	}
	var sb strings.Builder
	sb.Grow(size)
	strs := make([]string, 0, 2*len(recs))
	// strs never grows, so the pointers into it stay valid.
	keep := func(v string) *string {
		start := sb.Len()
		sb.WriteString(v)
		strs = append(strs, sb.String()[start:])
		return &strs[len(strs)-1]
	}
	if hasNext {
		// The iterator is kept by the reader until its next call, after the
		// records are gone, so it does not share their allocation.
		it := strings.Clone(next)
		out.NextShardIterator = &it
	}
	if hasBehind {
		out.MillisBehindLatest = &behind
	}
	if children {
		out.ChildShards = make([]types.ChildShard, 0)
	}
	if !sawRecs {
		return true
	}
	out.Records = make([]types.Record, len(recs))
	times := make([]time.Time, len(recs))
	var (
		lastArrival string
		lastTime    time.Time
	)
	for i := range recs {
		r, o := &recs[i], &out.Records[i]
		if r.hasData {
			o.Data = make([]byte, base64.StdEncoding.DecodedLen(len(r.data)))
			n, err := base64.StdEncoding.Decode(o.Data, unsafe.Slice(unsafe.StringData(r.data), len(r.data)))
			if err != nil {
				return false
			}
			o.Data = o.Data[:n:n]
		}
		if r.hasKey {
			o.PartitionKey = keep(r.key)
		}
		if r.hasSeq {
			o.SequenceNumber = keep(r.seq)
		}
		o.EncryptionType = encryptionType(r.encryption)
		if r.arrival != "" {
			// Records of one answer mostly share their arrival time.
			if r.arrival != lastArrival {
				f, err := strconv.ParseFloat(r.arrival, 64)
				if err != nil {
					return false
				}
				lastArrival, lastTime = r.arrival, smithytime.ParseEpochSeconds(f)
			}
			times[i] = lastTime
			o.ApproximateArrivalTimestamp = &times[i]
		}
	}
	return true
}

// encryptionType is v as an EncryptionType, without keeping the body for
// the known values.
func encryptionType(v string) types.EncryptionType {
	switch types.EncryptionType(v) {
	case "":
		return ""
	case types.EncryptionTypeNone:
		return types.EncryptionTypeNone
	case types.EncryptionTypeKms:
		return types.EncryptionTypeKms
	}
	return types.EncryptionType(strings.Clone(v))
}
