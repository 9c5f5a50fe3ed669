package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kpl"

	// The generate input and processors of the producers' configs, and
	// the file output in place of theirs.
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)

// TestSoakProducersHandTheOutputEachKeyInOrder runs the producers' configs,
// without their kinesis output, and checks that every key's counters reach
// the output in order: the output keeps a key's order only as the records
// reach it, so a producer that swapped two batches (a padded stream's
// processor on a thread per core) wrote a key's records out of order, and
// the soak counted that against the output (seed 7: big-k0/9 after
// big-k0/10). It needs more than one core to fail.
func TestSoakProducersHandTheOutputEachKeyInOrder(t *testing.T) {
	for _, st := range []*soakStream{
		{name: "soak-a", shards: 3, keys: 6, every: time.Millisecond},
		{name: "soak-big", shards: 1, keys: 2, every: time.Millisecond, padKiB: 96},
	} {
		t.Run(st.name, func(t *testing.T) {
			conf := producerConfig(st, "http://127.0.0.1:1")
			conf = conf[:strings.Index(conf, "\noutput:")] + "\n"
			conf = strings.Replace(conf, "count: 0", "count: 1000", 1)

			out := filepath.Join(t.TempDir(), "out.jsonl")
			conf += "output:\n  file: { path: " + out + ", codec: lines }\n"
			b := service.NewStreamBuilder()
			require.NoError(t, b.SetYAML(conf))
			s, err := b.Build()
			require.NoError(t, err)
			require.NoError(t, s.Run(t.Context()))

			f, err := os.Open(out)
			require.NoError(t, err)
			defer f.Close()
			last, n, poison := map[string]int{}, 0, 0
			var swapped []string
			lines := bufio.NewScanner(f)
			lines.Buffer(nil, 1<<20)
			for lines.Scan() {
				var r struct {
					K      string
					C      int
					Poison bool
				}
				require.NoError(t, json.Unmarshal(lines.Bytes(), &r))
				if r.C < last[r.K] && len(swapped) < 5 {
					swapped = append(swapped, fmt.Sprintf("%s/%d after %s/%d", r.K, r.C, r.K, last[r.K]))
				}
				last[r.K] = max(last[r.K], r.C)
				n++
				if r.Poison {
					poison++
				}
			}
			require.NoError(t, lines.Err())
			assert.Equal(t, 1000, n)
			assert.Equal(t, 1, poison, "the 801st of 1,000 messages is poison (poison.go)")
			assert.Empty(t, swapped, "keys whose records reached the output after a later one of theirs")
		})
	}
}

// TestSoakShadowLeavesOutStrayAggregates reads, into the soak's ground
// truth, an aggregate whose members all belong to the shard and one that
// holds a member of the other child of a split (a stray the output sent
// again): the stray's members must be left out, as readers drop them, or
// the checker counts them as lost and, read after the other child, as
// out of order (kpl-k0/4 in the stream after kpl-k0/6).
func TestSoakShadowLeavesOutStrayAggregates(t *testing.T) {
	half := new(big.Int).Lsh(big.NewInt(1), 127)
	low := &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String(new(big.Int).Sub(half, big.NewInt(1)).String())}
	rec := func(k string, c int, hash *big.Int) kpl.Record {
		return kpl.Record{PartitionKey: k, ExplicitHashKey: hash.String(), Data: fmt.Appendf(nil, `{"k":%q,"c":%d}`, k, c)}
	}
	ss := &shadowShard{id: "soak-kpl/shardId-000000000001"}
	now := time.Now()
	require.NoError(t, ss.addRecord("1", kpl.Encode([]kpl.Record{rec("kpl-k0", 4, big.NewInt(7)), rec("kpl-k1", 4, big.NewInt(9))}), low, now))
	require.NoError(t, ss.addRecord("2", kpl.Encode([]kpl.Record{rec("kpl-k0", 5, big.NewInt(7)), rec("kpl-k2", 5, half)}), low, now))
	require.NoError(t, ss.addRecord("3", []byte(`{"k":"kpl-k3","c":1}`), low, now))

	var got []string
	for _, r := range ss.recs {
		got = append(got, fmt.Sprintf("%s %s/%d", r.Seq, r.K, r.C))
	}
	assert.Equal(t, []string{"1/0 kpl-k0/4", "1/1 kpl-k1/4", "3 kpl-k3/1"}, got)
	assert.Equal(t, 2, ss.strays)
}
