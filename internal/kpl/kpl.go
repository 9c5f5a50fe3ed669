// Package kpl reads and writes the aggregated record format of the Kinesis
// Producer Library (KPL): many user records packed into one Kinesis record, so
// that small records do not each pay for a whole record of shard throughput.
//
// An aggregated record is the 4-byte magic 0xF3 0x89 0x9A 0xC2, then a
// protobuf AggregatedRecord message, then the 16-byte MD5 digest of that
// protobuf. The messages are (proto2):
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
//	message Tag { required string key = 1; optional string value = 2; }
//
// The wire format is read and written with protowire, so no generated code is
// needed. KCL, Flink and this project's input all read what Encode writes.
package kpl

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Magic prefixes every aggregated record.
var Magic = []byte{0xF3, 0x89, 0x9A, 0xC2}

// digestLen is the size of the MD5 digest that ends an aggregated record.
const digestLen = md5.Size

// Field numbers of the protobuf messages.
const (
	fieldPartitionKeyTable    protowire.Number = 1
	fieldExplicitHashKeyTable protowire.Number = 2
	fieldRecords              protowire.Number = 3

	fieldPartitionKeyIndex    protowire.Number = 1
	fieldExplicitHashKeyIndex protowire.Number = 2
	fieldData                 protowire.Number = 3
	fieldTags                 protowire.Number = 4
)

// ErrCorrupt is wrapped by every error Decode returns for data that carries
// the magic but is not a valid aggregated record (bad digest, bad protobuf,
// index out of range).
var ErrCorrupt = errors.New("corrupt KPL aggregated record")

// Record is one user record inside an aggregated record.
type Record struct {
	PartitionKey string
	// ExplicitHashKey is empty when the record has none.
	ExplicitHashKey string
	Data            []byte
}

// IsAggregated reports whether data looks like an aggregated record: it starts
// with the magic and is long enough to hold the digest. It does not verify
// the digest; Decode does.
func IsAggregated(data []byte) bool {
	return len(data) >= len(Magic)+digestLen && bytes.HasPrefix(data, Magic)
}

// Decode verifies an aggregated record and returns its user records in order.
// Data that is not aggregated (no magic) is an error too; callers check
// IsAggregated first and pass plain records through unchanged.
func Decode(data []byte) ([]Record, error) {
	if !IsAggregated(data) {
		return nil, fmt.Errorf("%w: missing magic prefix or too short (%d bytes)", ErrCorrupt, len(data))
	}
	body := data[len(Magic) : len(data)-digestLen]
	want := data[len(data)-digestLen:]
	if got := md5.Sum(body); !bytes.Equal(got[:], want) {
		return nil, fmt.Errorf("%w: MD5 digest mismatch", ErrCorrupt)
	}

	var (
		keys, hashKeys []string
		raw            [][]byte
	)
	err := walk(body, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil // unknown scalar fields are skipped, as protobuf does
		}
		switch num {
		case fieldPartitionKeyTable:
			keys = append(keys, string(v))
		case fieldExplicitHashKeyTable:
			hashKeys = append(hashKeys, string(v))
		case fieldRecords:
			raw = append(raw, v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	records := make([]Record, 0, len(raw))
	for i, r := range raw {
		rec, err := decodeRecord(r, keys, hashKeys)
		if err != nil {
			return nil, fmt.Errorf("decoding user record %d: %w", i, err)
		}
		records = append(records, rec)
	}
	return records, nil
}

func decodeRecord(b []byte, keys, hashKeys []string) (Record, error) {
	var (
		rec            Record
		keyIdx, ehkIdx uint64
		hasKey, hasEHK bool
		hasData        bool
	)
	err := walk(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == fieldPartitionKeyIndex && typ == protowire.VarintType:
			keyIdx, hasKey = varint(v), true
		case num == fieldExplicitHashKeyIndex && typ == protowire.VarintType:
			ehkIdx, hasEHK = varint(v), true
		case num == fieldData && typ == protowire.BytesType:
			rec.Data, hasData = v, true
		}
		return nil // tags and unknown fields are ignored
	})
	if err != nil {
		return rec, err
	}
	if !hasKey || !hasData {
		return rec, fmt.Errorf("%w: user record lacks a required partition_key_index or data", ErrCorrupt)
	}
	if keyIdx >= uint64(len(keys)) {
		return rec, fmt.Errorf("%w: partition key index %d out of a table of %d", ErrCorrupt, keyIdx, len(keys))
	}
	rec.PartitionKey = keys[keyIdx]
	if hasEHK {
		if ehkIdx >= uint64(len(hashKeys)) {
			return rec, fmt.Errorf("%w: explicit hash key index %d out of a table of %d", ErrCorrupt, ehkIdx, len(hashKeys))
		}
		rec.ExplicitHashKey = hashKeys[ehkIdx]
	}
	if rec.Data == nil {
		rec.Data = []byte{}
	}
	return rec, nil
}

// walk calls fn for each field of a protobuf message. For varint fields v is
// the encoded varint (decode with varint); for length-delimited fields it is
// the payload. Other wire types are skipped.
func walk(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.VarintType:
			_, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(m))
			}
			v, n = b[:m], m
		case protowire.BytesType:
			p, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(m))
			}
			v, n = p, m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %v", ErrCorrupt, protowire.ParseError(n))
			}
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func varint(b []byte) uint64 {
	v, _ := protowire.ConsumeVarint(b)
	return v
}

// Encode packs records into one aggregated record. Partition keys and explicit
// hash keys are written once each in their tables and referenced by index.
func Encode(records []Record) []byte {
	a := NewAggregator()
	for _, r := range records {
		a.Add(r)
	}
	return a.Bytes()
}

// Aggregator builds an aggregated record incrementally and knows its encoded
// size at every step, so a producer can stop adding before a size limit.
type Aggregator struct {
	keyIdx   map[string]uint64
	keys     []string
	ehkIdx   map[string]uint64
	ehks     []string
	records  []added
	bodySize int // size of the AggregatedRecord protobuf so far
}

// added is a user record to be written by Bytes: its table indices and its
// data, not copied.
type added struct {
	keyIdx, ehkIdx uint64
	ehk            bool
	data           []byte
}

// NewAggregator returns an empty Aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{keyIdx: map[string]uint64{}, ehkIdx: map[string]uint64{}}
}

// Len is the number of user records added.
func (a *Aggregator) Len() int { return len(a.records) }

// Size is the encoded size of the aggregated record so far, magic and digest
// included.
func (a *Aggregator) Size() int { return len(Magic) + a.bodySize + digestLen }

// SizeWith is what Size would be after adding r, without adding it.
func (a *Aggregator) SizeWith(r Record) int {
	rec, grow := a.indices(r)
	return a.Size() + grow + protowire.SizeTag(fieldRecords) + protowire.SizeBytes(rec.size())
}

// indices returns r as it would be added (its table indices) and how many
// body bytes new table entries would cost.
func (a *Aggregator) indices(r Record) (rec added, grow int) {
	rec = added{data: r.Data, ehk: r.ExplicitHashKey != ""}
	var ok bool
	if rec.keyIdx, ok = a.keyIdx[r.PartitionKey]; !ok {
		rec.keyIdx = uint64(len(a.keys))
		grow += tableEntrySize(fieldPartitionKeyTable, r.PartitionKey)
	}
	if rec.ehk {
		if rec.ehkIdx, ok = a.ehkIdx[r.ExplicitHashKey]; !ok {
			rec.ehkIdx = uint64(len(a.ehks))
			grow += tableEntrySize(fieldExplicitHashKeyTable, r.ExplicitHashKey)
		}
	}
	return rec, grow
}

// size is the encoded size of r's Record message.
func (r added) size() int {
	n := protowire.SizeTag(fieldPartitionKeyIndex) + protowire.SizeVarint(r.keyIdx)
	if r.ehk {
		n += protowire.SizeTag(fieldExplicitHashKeyIndex) + protowire.SizeVarint(r.ehkIdx)
	}
	return n + protowire.SizeTag(fieldData) + protowire.SizeBytes(len(r.data))
}

func tableEntrySize(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// Add appends r. Its data is not copied but read by Bytes, so it must not
// change in between; the aggregate is written once, by Bytes.
func (a *Aggregator) Add(r Record) {
	rec, grow := a.indices(r)
	if uint64(len(a.keys)) == rec.keyIdx {
		a.keyIdx[r.PartitionKey] = rec.keyIdx
		a.keys = append(a.keys, r.PartitionKey)
	}
	if rec.ehk && uint64(len(a.ehks)) == rec.ehkIdx {
		a.ehkIdx[r.ExplicitHashKey] = rec.ehkIdx
		a.ehks = append(a.ehks, r.ExplicitHashKey)
	}
	a.records = append(a.records, rec)
	a.bodySize += grow + protowire.SizeTag(fieldRecords) + protowire.SizeBytes(rec.size())
}

// Bytes returns the aggregated record: magic, protobuf, MD5 digest. It
// writes every user record's data once, into a buffer of the final size.
func (a *Aggregator) Bytes() []byte {
	out := make([]byte, 0, a.Size())
	out = append(out, Magic...)
	for _, k := range a.keys {
		out = protowire.AppendTag(out, fieldPartitionKeyTable, protowire.BytesType)
		out = protowire.AppendString(out, k)
	}
	for _, k := range a.ehks {
		out = protowire.AppendTag(out, fieldExplicitHashKeyTable, protowire.BytesType)
		out = protowire.AppendString(out, k)
	}
	for _, r := range a.records {
		out = protowire.AppendTag(out, fieldRecords, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(r.size()))
		out = protowire.AppendTag(out, fieldPartitionKeyIndex, protowire.VarintType)
		out = protowire.AppendVarint(out, r.keyIdx)
		if r.ehk {
			out = protowire.AppendTag(out, fieldExplicitHashKeyIndex, protowire.VarintType)
			out = protowire.AppendVarint(out, r.ehkIdx)
		}
		out = protowire.AppendTag(out, fieldData, protowire.BytesType)
		out = protowire.AppendBytes(out, r.data)
	}
	sum := md5.Sum(out[len(Magic):])
	return append(out, sum[:]...)
}

// Reset empties the Aggregator for reuse.
func (a *Aggregator) Reset() {
	clear(a.keyIdx)
	clear(a.ehkIdx)
	a.keys, a.ehks, a.records, a.bodySize = a.keys[:0], a.ehks[:0], nil, 0
}
