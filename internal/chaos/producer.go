package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// producerYAML writes batches holding recordsPerKeyPerBatch records of each
// key, k0..kN, each with the key's counter, through the output and the
// proxy. The output runs with its default per-key ordering and
// max_in_flight above 1, and retries without bound, so a key's records must
// land in counter order and none is given up: the checker reads the stream
// back in order (OutputOrderViolations). A few messages are poison
// (poison.go).
const producerYAML = `
http: { enabled: false }
logger: { level: info, format: logfmt }
input:
  generate:
    count: %d
    batch_size: %d
    interval: %s
    mapping: |
      let n = counter() - 1
      root.k = "k" + ($n %% %d).string()
      root.c = ($n / %d).floor().int64() + 1
      ` + poisonProducerLine + `
output:
  kinesis:
    stream: %s
    partition_key: '${! this.k }'
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    max_in_flight: 8
    max_retries: 0
    backoff: { initial_interval: 50ms, max_interval: 1s, max_elapsed_time: 0s }
`

// splitBatchingYAML is what Config.SplitBatching adds to the producer: a
// record over max_record_size (counter 0, which the checker never expects)
// before every fifth record of a key, in the same batch, so that writes end
// early on records that fail validation among valid ones of their keys;
// the output's own batching (the default count and period, so batches grow
// while the writes lag, as they do in the other phases) split by a
// processor, each batch joined again before the output writes it; and a fallback that drops the invalid
// records and nacks anything else (it is sent again).
const splitBatchingYAML = `
pipeline:
  # One thread: two would hand consecutive input batches to the output in
  # either order, and the stream would show those swaps.
  threads: 1
  processors:
    - mapping: |
        root = if this.c %% 5 == 0 { [ {"k": this.k, "c": 0, "pad": "x".repeat(2048)}, this ] } else { [ this ] }
    - unarchive: { format: json_array }
output:
  fallback:
    - kinesis:
        stream: %s
        partition_key: '${! this.k }'
        region: %s
        endpoint: %s
        credentials: { id: %s, secret: %s }
        max_in_flight: 8
        max_retries: 0
        max_record_size: 1024
        backoff: { initial_interval: 50ms, max_interval: 1s, max_elapsed_time: 0s }
        batching:
          count: 500
          period: 50ms
          processors: [ { split: { size: 7 } } ]
    - switch:
        cases:
          - check: this.c == 0
            output: { drop: {} }
          - output: { reject: 'a valid record failed: ${! @fallback_error }' }
`

// recordsPerKeyPerBatch is how many records of each key one producer batch
// holds, so that the output's per-key order is tested within a batch too.
const recordsPerKeyPerBatch = 4

// startProducer launches the producer process writing batches batches.
func (r *runner) startProducer(batches int) (*child, error) {
	p := r.plan
	conf := filepath.Join(r.cfg.Dir, "producer.yaml")
	// The same records per second as one record per key per BatchInterval.
	yaml := fmt.Sprintf(producerYAML, batches*p.Keys, recordsPerKeyPerBatch*p.Keys, recordsPerKeyPerBatch*p.BatchInterval, p.Keys, p.Keys,
		streamName, testenv.Region, r.front.URL, testenv.AccessKey, testenv.SecretKey)
	if r.cfg.SplitBatching {
		yaml = yaml[:strings.Index(yaml, "output:")] + fmt.Sprintf(splitBatchingYAML,
			streamName, testenv.Region, r.front.URL, testenv.AccessKey, testenv.SecretKey)
	}
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	return r.launch(conf, filepath.Join(r.cfg.Dir, "producer.log"))
}
