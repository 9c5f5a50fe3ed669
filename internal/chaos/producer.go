package chaos

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// producerYAML writes batches holding recordsPerKeyPerBatch records of each
// key, k0..kN, each with the key's counter, through the output and the
// proxy. The output runs with its default per-key ordering and
// max_in_flight above 1, and retries without bound, so a key's records must
// land in counter order and none is given up: the checker reads the stream
// back in order (OutputOrderViolations).
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

// recordsPerKeyPerBatch is how many records of each key one producer batch
// holds, so that the output's per-key order is tested within a batch too.
const recordsPerKeyPerBatch = 4

// startProducer launches the producer process writing batches batches.
func (r *runner) startProducer(batches int) (*child, error) {
	p := r.plan
	conf := filepath.Join(r.cfg.Dir, "producer.yaml")
	// The same records per second as one record per key per BatchInterval.
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(producerYAML, batches*p.Keys, recordsPerKeyPerBatch*p.Keys, recordsPerKeyPerBatch*p.BatchInterval, p.Keys, p.Keys,
		streamName, testenv.Region, r.front.URL, testenv.AccessKey, testenv.SecretKey)), 0o600); err != nil {
		return nil, err
	}
	return r.launch(conf, filepath.Join(r.cfg.Dir, "producer.log"))
}
