package kpl

import (
	"crypto/md5"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handBuilt returns an aggregated record written byte by byte from the proto
// definition, independent of Encode: two partition keys, one explicit hash
// key, three records, one of which carries a tag that readers must skip.
func handBuilt() []byte {
	body := []byte{
		0x0A, 0x01, 'a', // partition_key_table[0] = "a"
		0x0A, 0x02, 'b', 'c', // partition_key_table[1] = "bc"
		0x12, 0x01, '5', // explicit_hash_key_table[0] = "5"
		0x1A, 0x06, // records[0], 6 bytes
		0x08, 0x00, // partition_key_index = 0
		0x1A, 0x02, 'h', 'i', // data = "hi"
		0x1A, 0x0D, // records[1], 13 bytes
		0x08, 0x01, // partition_key_index = 1
		0x10, 0x00, // explicit_hash_key_index = 0
		0x1A, 0x02, 'y', 'o', // data = "yo"
		0x22, 0x03, 0x0A, 0x01, 'k', // tags[0] = {key: "k"}
		0x1A, 0x04, // records[2], 4 bytes
		0x08, 0x00, // partition_key_index = 0
		0x1A, 0x00, // data = ""
	}
	sum := md5.Sum(body)
	out := append([]byte{0xF3, 0x89, 0x9A, 0xC2}, body...)
	return append(out, sum[:]...)
}

func TestDecodeHandBuiltVector(t *testing.T) {
	data := handBuilt()
	require.True(t, IsAggregated(data))
	recs, err := Decode(data)
	require.NoError(t, err)
	assert.Equal(t, []Record{
		{PartitionKey: "a", Data: []byte("hi")},
		{PartitionKey: "bc", ExplicitHashKey: "5", Data: []byte("yo")},
		{PartitionKey: "a", Data: []byte{}},
	}, recs)
}

func TestEncodeMatchesHandBuiltLayout(t *testing.T) {
	// Encode writes tables first, then records, as the KPL does; without the
	// tag, the encoding of the same records is byte-for-byte predictable.
	got := Encode([]Record{
		{PartitionKey: "a", Data: []byte("hi")},
		{PartitionKey: "a", Data: []byte("yo")},
	})
	body := []byte{
		0x0A, 0x01, 'a',
		0x1A, 0x06, 0x08, 0x00, 0x1A, 0x02, 'h', 'i',
		0x1A, 0x06, 0x08, 0x00, 0x1A, 0x02, 'y', 'o',
	}
	sum := md5.Sum(body)
	want := append(append([]byte{0xF3, 0x89, 0x9A, 0xC2}, body...), sum[:]...)
	assert.Equal(t, want, got)
}

func TestRoundTrip(t *testing.T) {
	tests := map[string][]Record{
		"one record":  {{PartitionKey: "k", Data: []byte("v")}},
		"shared keys": {{PartitionKey: "k", Data: []byte("1")}, {PartitionKey: "k", Data: []byte("2")}, {PartitionKey: "j", Data: []byte("3")}},
		"hash keys": {
			{PartitionKey: "k", ExplicitHashKey: "0", Data: []byte("1")},
			{PartitionKey: "k", Data: []byte("2")},
			{PartitionKey: "k", ExplicitHashKey: "340282366920938463463374607431768211455", Data: []byte("3")},
		},
		"unicode and binary": {{PartitionKey: "clé-日本", Data: []byte{0, 0xFF, 0xF3, 0x89}}},
	}
	many := make([]Record, 1000)
	for i := range many {
		many[i] = Record{PartitionKey: fmt.Sprintf("key-%d", i%37), Data: []byte(fmt.Sprintf("payload %d", i))}
	}
	tests["a thousand"] = many

	for name, recs := range tests {
		t.Run(name, func(t *testing.T) {
			a := NewAggregator()
			for _, r := range recs {
				predicted := a.SizeWith(r)
				a.Add(r)
				require.Equal(t, predicted, a.Size(), "SizeWith predicts Size after Add")
			}
			data := a.Bytes()
			assert.Len(t, data, a.Size())
			got, err := Decode(data)
			require.NoError(t, err)
			require.Len(t, got, len(recs))
			for i := range recs {
				assert.Equal(t, recs[i].PartitionKey, got[i].PartitionKey, "record %d", i)
				assert.Equal(t, recs[i].ExplicitHashKey, got[i].ExplicitHashKey, "record %d", i)
				assert.Equal(t, recs[i].Data, got[i].Data, "record %d", i)
			}
		})
	}
}

func TestAggregatorReset(t *testing.T) {
	a := NewAggregator()
	a.Add(Record{PartitionKey: "x", Data: []byte("1")})
	a.Reset()
	assert.Equal(t, 0, a.Len())
	a.Add(Record{PartitionKey: "y", Data: []byte("2")})
	got, err := Decode(a.Bytes())
	require.NoError(t, err)
	assert.Equal(t, []Record{{PartitionKey: "y", Data: []byte("2")}}, got)
}

func TestDecodeRejectsCorruptData(t *testing.T) {
	good := handBuilt()
	flipped := append([]byte(nil), good...)
	flipped[10] ^= 0x01 // inside the protobuf: the digest no longer matches

	badIndexBody := []byte{0x0A, 0x01, 'a', 0x1A, 0x06, 0x08, 0x05, 0x1A, 0x02, 'h', 'i'}
	badIndexSum := md5.Sum(badIndexBody)
	badIndex := append(append([]byte{0xF3, 0x89, 0x9A, 0xC2}, badIndexBody...), badIndexSum[:]...)

	truncBody := []byte{0x0A, 0x05, 'a'} // says 5 bytes, has 1
	truncSum := md5.Sum(truncBody)
	trunc := append(append([]byte{0xF3, 0x89, 0x9A, 0xC2}, truncBody...), truncSum[:]...)

	tests := map[string][]byte{
		"plain record":           []byte("just a normal record that is long enough"),
		"too short":              {0xF3, 0x89, 0x9A, 0xC2, 1, 2},
		"digest mismatch":        flipped,
		"key index out of range": badIndex,
		"truncated protobuf":     trunc,
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(data)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestIsAggregated(t *testing.T) {
	assert.False(t, IsAggregated(nil))
	assert.False(t, IsAggregated([]byte("hello world, this is a plain record")))
	assert.False(t, IsAggregated([]byte{0xF3, 0x89, 0x9A, 0xC2}), "magic alone has no room for a digest")
	assert.True(t, IsAggregated(Encode(nil)), "an empty aggregate is still aggregated")
}

// BenchmarkAggregate builds one aggregate of 500 records of 200 bytes under
// 20 partition keys, as the output does for one shard's share of a batch.
func BenchmarkAggregate(b *testing.B) {
	recs := make([]Record, 500)
	for i := range recs {
		recs[i] = Record{PartitionKey: fmt.Sprintf("key-%d", i%20), Data: make([]byte, 200)}
	}
	b.ReportAllocs()
	for b.Loop() {
		a := NewAggregator()
		for _, r := range recs {
			a.Add(r)
		}
		_ = a.Bytes()
	}
}
