package kinesisx

import (
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// largeAnswer is a GetRecords answer whose records carry data of sizes
// bytes (each record's bytes differ, so a misplaced piece shows).
func largeAnswer(sizes ...int) string {
	var sb strings.Builder
	sb.WriteString(`{"MillisBehindLatest":12,"NextShardIterator":"AAAA/it=","Records":[`)
	for i, n := range sizes {
		if i > 0 {
			sb.WriteString(",")
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(j*7 + i)
		}
		fmt.Fprintf(&sb, `{"ApproximateArrivalTimestamp":1.732975147123E9,"Data":"%s","PartitionKey":"key-%d","SequenceNumber":"49590338271490256608559692538361571095921575989136%06d"}`,
			base64.StdEncoding.EncodeToString(data), i, i)
	}
	sb.WriteString("]}")
	return sb.String()
}

// Records larger than the window's chunk are decoded as they stream in;
// the codec still reads what the SDK reads, in any pieces, and hands the
// SDK the whole body when it gives up in the middle of a long string.
func TestGetRecordsDecoderReadsLargeRecordsInPieces(t *testing.T) {
	answers := map[string]string{
		"one record of 900 KB":         largeAnswer(900_000),
		"ten of 900 KB":                largeAnswer(900_000, 900_000, 900_000, 900_000, 900_000, 900_000, 900_000, 900_000, 900_000, 900_000),
		"mixed sizes":                  largeAnswer(30_000, 0, 1, 2_500_000, 24_575, 24_576, 24_577, 100, 1_048_576, 700_000),
		"larger than 1 MiB first":      largeAnswer(3_000_000, 5),
		"a backslash 100 KB in":        strings.Replace(largeAnswer(900_000), "Data\":\"", "Data\":\""+strings.Repeat("QUJD", 25_000)+`\/`, 1),
		"bad base64 100 KB in":         strings.Replace(largeAnswer(900_000), "Data\":\"", "Data\":\""+strings.Repeat("QUJD", 25_000)+"!!!!", 1),
		"cut short 500 KB into a data": largeAnswer(900_000)[:500_000],
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":           func(r io.Reader) io.Reader { return r },
		"1000-byte reads": func(r io.Reader) io.Reader { return &pieces{r: r, n: 1000} },
		"one byte reads":  iotest.OneByteReader,
	}
	for name, answer := range answers {
		want, wantErr := getWith(answer, false)
		for rname, reader := range readers {
			if rname == "one byte reads" && len(answer) > 2_000_000 {
				continue // slow, and covered by the others
			}
			t.Run(name+"/"+rname, func(t *testing.T) {
				for _, sizeHint := range []int64{0, int64(len(answer))} {
					var got kinesis.GetRecordsOutput
					ok, body, err := decodeGetRecords(reader(strings.NewReader(answer)), sizeHint, &got)
					require.NoError(t, err)
					if !ok {
						assert.True(t, answer == string(body), "the answer is rebuilt whole for the SDK (size hint %d)", sizeHint)
						continue
					}
					require.NoError(t, wantErr)
					assertSameGetRecords(t, want, &got)
					for i, r := range got.Records {
						assert.Equal(t, len(r.Data), cap(r.Data), "record %d's data has no spare capacity", i)
					}
				}
			})
		}
	}
}

// pieces reads at most n bytes at a time.
type pieces struct {
	r io.Reader
	n int
}

func (p *pieces) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }

// Reading a record of 900 KB allocates about its data: its base64 is
// decoded as it streams in, not gathered whole in a window that doubles to
// hold it (2 MiB, and 4 MiB of allocations in all, next to the 900 KB of
// data). With many shards reading at once, that window was memory the byte
// budget did not count.
func TestGetRecordsDecoderAllocatesAboutTheData(t *testing.T) {
	const size = 900_000
	answer := largeAnswer(size)
	for _, sizeHint := range []int64{0, int64(len(answer))} {
		var before, after runtime.MemStats
		var got kinesis.GetRecordsOutput
		r := &pieces{r: strings.NewReader(answer), n: 16 << 10} // as a body arrives
		runtime.ReadMemStats(&before)
		ok, _, err := decodeGetRecords(r, sizeHint, &got)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.True(t, ok)
		require.Len(t, got.Records, 1)
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("size hint %d: %d bytes allocated for %d of data", sizeHint, allocated, size)
		// Without the body's length the first record's size is guessed
		// (1 MiB) and the slice copied to its size once read.
		most := uint64(size*5/4 + 256<<10)
		if sizeHint == 0 {
			most += size
		}
		assert.LessOrEqual(t, allocated, most, "size hint %d", sizeHint)
	}
}
