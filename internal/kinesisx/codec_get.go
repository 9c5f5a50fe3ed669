package kinesisx

import (
	"bytes"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	smithytime "github.com/aws/smithy-go/time"
)

// decodeGetRecords fills out from a GetRecords answer as it streams in
// from r (ok). Each record's data is decoded as soon as its string is in,
// so the answer's JSON body is never held whole next to its records: what
// is held is the decoded records, the window reading the current one, and
// the rest of the body without the data (to hand the SDK an answer the
// codec does not take). On !ok, out may hold part of the answer and body
// is the whole answer for the SDK to decode; err is a failed read.
//
// Each record's data gets its own slice, as from the SDK, so a message kept
// by the pipeline holds only its own bytes; the records' keys and sequence
// numbers share a few blocks per answer, and the pointers to them one array.
func decodeGetRecords(r io.Reader, sizeHint int64, out *kinesis.GetRecordsOutput) (ok bool, body []byte, err error) {
	d := streamScanner{r: r, buf: make([]byte, 0, min(max(sizeHint, 512), streamChunk)), size: sizeHint}
	if d.decode(out) {
		if d.err != nil {
			return false, nil, d.err
		}
		return true, nil, nil
	}
	body, err = d.body()
	return false, body, err
}

// decodeGetRecordsOutput is decodeGetRecords of a body read already.
func decodeGetRecordsOutput(body []byte, out *kinesis.GetRecordsOutput) bool {
	ok, _, _ := decodeGetRecords(bytes.NewReader(body), int64(len(body)), out)
	return ok
}

// getRecordStrs is where a record's strings are, until the pointers to
// them are made.
type getRecordStrs struct {
	key, seq       string
	hasKey, hasSeq bool
}

func (d *streamScanner) decode(out *kinesis.GetRecordsOutput) bool {
	var (
		recs     []types.Record
		strs     []getRecordStrs
		times    []time.Time
		arena    strArena
		sawRecs  bool
		behind   int64
		children bool
		// Records of one answer mostly share their arrival time.
		lastArrival string
		lastTime    time.Time
	)
	ok := d.object(func(key string) bool {
		switch key {
		case "Records":
			sawRecs = true
			return d.array(func() bool {
				var (
					rec        types.Record
					st         getRecordStrs
					hasArrival bool
					arrival    time.Time
				)
				if !d.object(func(key string) bool {
					switch key {
					case "Data":
						data, ok := d.data()
						rec.Data = data
						return ok
					case "PartitionKey", "SequenceNumber", "EncryptionType":
						s, e, ok := d.rawString()
						if !ok {
							return false
						}
						switch key {
						case "PartitionKey":
							st.key, st.hasKey = arena.keep(d.buf[s:e]), true
						case "SequenceNumber":
							st.seq, st.hasSeq = arena.keep(d.buf[s:e]), true
						default:
							rec.EncryptionType = encryptionType(d.buf[s:e])
						}
						return true
					case "ApproximateArrivalTimestamp":
						n, ok := d.number()
						if !ok {
							return false
						}
						if string(n) != lastArrival {
							f, err := strconv.ParseFloat(string(n), 64)
							if err != nil {
								return false
							}
							lastArrival, lastTime = string(n), smithytime.ParseEpochSeconds(f)
						}
						hasArrival, arrival = true, lastTime
						return true
					}
					return false // a field this codec does not know: the SDK reads the answer
				}) {
					return false
				}
				if hasArrival {
					times = append(times, arrival)
					// A placeholder: the pointer is set once times stops growing.
					rec.ApproximateArrivalTimestamp = &lastTime
				}
				recs = append(recs, rec)
				strs = append(strs, st)
				if len(recs) == 1 {
					if n, skel := d.sizeAfterFirst(); n > 1 {
						recs, strs = slices.Grow(recs, n-1), slices.Grow(strs, n-1)
						times = slices.Grow(times, n)
						d.skel = slices.Grow(d.skel, skel-len(d.skel))
					}
				}
				return true
			})
		case "NextShardIterator":
			if d.literal("null") {
				return true
			}
			s, e, ok := d.rawString()
			if ok {
				// The iterator is kept by the reader until its next call,
				// after the records are gone, so it has its own allocation.
				it := string(d.buf[s:e])
				out.NextShardIterator = &it
			}
			return ok
		case "MillisBehindLatest":
			n, ok := d.number()
			if !ok {
				return false
			}
			v, err := strconv.ParseInt(string(n), 10, 64)
			behind = v
			out.MillisBehindLatest = &behind
			return err == nil
		case "ChildShards":
			// Only an empty list is read here; the SDK reads shards.
			children = true
			return d.next('[') && d.next(']')
		}
		return false // a field this codec does not know: the SDK reads the answer
	})
	if !ok {
		return false
	}
	// Nothing but white space may follow the answer.
	d.space()
	if j := d.i; d.byteAt(&j) || d.err != nil {
		return false
	}
	return d.finish(out, recs, strs, times, sawRecs, children)
}

// finish sets the pointers of the records decoded.
func (d *streamScanner) finish(out *kinesis.GetRecordsOutput, recs []types.Record, strs []getRecordStrs, times []time.Time, sawRecs, children bool) bool {
	if children {
		out.ChildShards = make([]types.ChildShard, 0)
	}
	if !sawRecs {
		return true
	}
	ptrs := make([]string, 0, 2*len(recs))
	// ptrs never grows, so the pointers into it stay valid.
	keep := func(v string) *string {
		ptrs = append(ptrs, v)
		return &ptrs[len(ptrs)-1]
	}
	t := 0
	for i := range recs {
		if strs[i].hasKey {
			recs[i].PartitionKey = keep(strs[i].key)
		}
		if strs[i].hasSeq {
			recs[i].SequenceNumber = keep(strs[i].seq)
		}
		if recs[i].ApproximateArrivalTimestamp != nil {
			recs[i].ApproximateArrivalTimestamp = &times[t]
			t++
		}
	}
	if recs == nil {
		recs = []types.Record{}
	}
	out.Records = recs
	return true
}

// encryptionType is v as an EncryptionType, without keeping the body for
// the known values.
func encryptionType(b []byte) types.EncryptionType {
	switch string(b) {
	case "":
		return ""
	case string(types.EncryptionTypeNone):
		return types.EncryptionTypeNone
	case string(types.EncryptionTypeKms):
		return types.EncryptionTypeKms
	}
	return types.EncryptionType(string(b))
}
