package reader

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// Guards error texts compared with every number blanked: an output whose
// errors differ only in their status code (a refusal, 422, and an outage,
// 503) had the outage that began while a poison record was being isolated
// charged to the good records being halved, as if it were the poison
// record's own error, and they went to the dead letter. A status code is
// not an id: two codes are two errors.
func TestAnOutageWhoseStatusCodeAloneDiffersFromARefusalChargesNoGoodRecord(t *testing.T) {
	t.Parallel()
	const n, poison, maxAttempts, down = 16, 12, 3, 15
	errRefused := fmt.Errorf("sink answered status 422")
	errDown := fmt.Errorf("sink answered status 503")
	dl := &fakeDeadLetter{}
	h := startPoisonReader(t, nextShard(), &consumertest.KinesisShard{Records: n},
		poisonConfig(n, consumer.Redelivery{MaxAttempts: maxAttempts, Isolate: true, DeadLetter: dl}))
	processed := map[int]int{}
	handOvers, failedDown := 0, 0
	for len(processed)+len(dl.records()) < n {
		b := h.next(t, 10*time.Second)
		handOvers++
		bad := false
		for _, rec := range b.Records {
			bad = bad || recordNum(t, rec) == poison
		}
		switch {
		case len(processed) > 0 && failedDown < down:
			// The first half was processed; now the output is down.
			failedDown++
			b.Ack(errDown)
		case bad:
			b.Ack(errRefused)
		default:
			for _, rec := range b.Records {
				processed[recordNum(t, rec)]++
			}
			b.Ack(nil)
		}
	}
	var dead []string
	for _, d := range dl.records() {
		dead = append(dead, d.Sequence)
	}
	require.Equal(t, []string{consumertest.SeqOf(h.shard, poison)}, dead, "only the poison record goes to the dead letter")
	for k := 1; k <= n; k++ {
		if k != poison {
			assert.Equal(t, 1, processed[k], "record %d processed once", k)
		}
	}
}
