package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			last, n := map[string]int{}, 0
			var swapped []string
			lines := bufio.NewScanner(f)
			lines.Buffer(nil, 1<<20)
			for lines.Scan() {
				var r struct {
					K string
					C int
				}
				require.NoError(t, json.Unmarshal(lines.Bytes(), &r))
				if r.C < last[r.K] && len(swapped) < 5 {
					swapped = append(swapped, fmt.Sprintf("%s/%d after %s/%d", r.K, r.C, r.K, last[r.K]))
				}
				last[r.K] = max(last[r.K], r.C)
				n++
			}
			require.NoError(t, lines.Err())
			assert.Equal(t, 1000, n)
			assert.Empty(t, swapped, "keys whose records reached the output after a later one of theirs")
		})
	}
}
