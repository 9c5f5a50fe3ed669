package input

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The table of a Redis that forgets or stalls under load: two instances of
// one group read a 4-shard stream while 200 records/s are written, and
// Redis is stopped past the lease and brought back empty (with and
// without a third instance joining the moment it is back), or frozen three
// times. Each row prints lost and duplicate counts.

// outageShards and outageRate shape the load: 20 records every 100 ms.
const (
	outageShards = 4
	outageBatch  = 20
	outageTick   = 100 * time.Millisecond
)

// outageRun is one row: its input settings, the fault, and whether a third
// instance starts the moment the fault ends.
type outageRun struct {
	start    string
	lease    string // the lease block of the input
	fault    func(t *testing.T, red *testenv.Redis, leaseKey string)
	newcomer bool
	// holdersLate, with newcomer, keeps the first two instances from
	// reaching Redis (a gate in front of them) for that long after it is
	// back, while the newcomer reaches it directly: it meets the empty
	// store before any holder can re-seed it, as when their next renewal
	// or commit is seconds away.
	holdersLate time.Duration
}

// leaseTokens reads every lease's fencing token.
func leaseTokens(t *testing.T, red *testenv.Redis, group, streamID string) map[string]string {
	t.Helper()
	c := red.Client()
	defer c.Close()
	all, err := c.HGetAll(t.Context(), "kinesis:{"+group+":"+streamID+"}:lease").Result()
	require.NoError(t, err)
	out := map[string]string{}
	for shard, v := range all {
		out[shard] = v[strings.LastIndexByte(v, '|')+1:]
	}
	return out
}

// balanced reports whether two owners hold two live leases each.
func balanced(t *testing.T, red *testenv.Redis, group, streamID string) bool {
	t.Helper()
	c := red.Client()
	defer c.Close()
	all, err := c.HGetAll(t.Context(), "kinesis:{"+group+":"+streamID+"}:lease").Result()
	require.NoError(t, err)
	owners := map[string]int{}
	for _, v := range all {
		parts := strings.Split(v, "|")
		if exp, _ := strconv.ParseInt(parts[len(parts)-2], 10, 64); parts[0] != "" && exp > time.Now().UnixMilli() {
			owners[parts[0]]++
		}
	}
	for _, n := range owners {
		if n != outageShards/2 {
			return false
		}
	}
	return len(owners) == 2
}

// leaseOwners lists who holds a lease now.
func leaseOwners(t *testing.T, red *testenv.Redis, group, streamID string) map[string]bool {
	t.Helper()
	c := red.Client()
	defer c.Close()
	all, err := c.HGetAll(t.Context(), "kinesis:{"+group+":"+streamID+"}:lease").Result()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, v := range all {
		out[v[:strings.IndexByte(v, '|')]] = true
	}
	return out
}

// newcomerTookEarly watches, for a lease period, the leases of a store
// that just came back empty, and names the shards an instance other than
// the known owners took before the group record was re-seeded.
func newcomerTookEarly(t *testing.T, red *testenv.Redis, group, streamID string, owners map[string]bool) []string {
	c := red.Client()
	defer c.Close()
	var early []string
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		ctx := context.WithoutCancel(t.Context())
		reseeded, err := c.HExists(ctx, "kinesis:{"+group+":"+streamID+"}:epoch", "reseeded").Result()
		if err != nil || reseeded {
			return early
		}
		all, err := c.HGetAll(ctx, "kinesis:{"+group+":"+streamID+"}:lease").Result()
		if err != nil {
			continue
		}
		for shard, v := range all {
			if owner := v[:strings.IndexByte(v, '|')]; owner != "" && !owners[owner] && !slices.Contains(early, shard) {
				early = append(early, shard)
			}
		}
	}
	return early
}

// run writes under load through the fault and returns what was written
// during the load, delivered of it, duplicates of it and of the records
// read before it.
func (o outageRun) run(t *testing.T, emu *testenv.Kinesis, name string) (written, delivered, dups, beforeDups int, tokensBefore, tokensAfter map[string]string) {
	red := testenv.NewRedis(t)
	group := "g-" + name
	arn := emu.MustCreateStream(t, name, outageShards)
	writeN(t, emu, name, "before", 400)
	c := &counting{}
	yamlFor := func(url string) string {
		return strings.Replace(inputYAML(name, emu.Endpoint, url, group, "  start_position: "+o.start+"\n"),
			"  lease:\n    period: 3s\n    rebalance_period: 300ms\n", o.lease, 1)
	}
	yaml, holdersYAML := yamlFor(red.URL()), yamlFor(red.URL())
	var gate *redisGate
	if o.holdersLate > 0 {
		gate = newRedisGate(t, red.Addr)
		holdersYAML = yamlFor(strings.Replace(red.URL(), red.Addr, gate.Addr(), 1))
	}
	startStream(t, holdersYAML, c.handler)
	startStream(t, holdersYAML, c.handler)
	require.Eventually(t, func() bool { return liveLeases(t, red, group, arn) == outageShards }, 60*time.Second, 100*time.Millisecond)
	if o.start == "trim_horizon" {
		require.Eventually(t, func() bool { d, _ := c.tally("before"); return d == 400 }, 60*time.Second, 100*time.Millisecond)
	}
	// Let balancing settle (two shards each), so a token that moves later
	// is the fault's.
	require.Eventually(t, func() bool { return balanced(t, red, group, arn) }, 60*time.Second, 100*time.Millisecond)
	tokensBefore = leaseTokens(t, red, group, arn)

	var n atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		kc := emu.Client()
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			var entries []types.PutRecordsRequestEntry
			for j := range outageBatch {
				entries = append(entries, types.PutRecordsRequestEntry{PartitionKey: aws.String(fmt.Sprintf("k%d", j)), Data: fmt.Appendf(nil, "w%04d-%02d", i, j)})
			}
			out, err := kc.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(name), Records: entries})
			if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
				done <- fmt.Errorf("writing batch %d: %v (%d failed)", i, err, aws.ToInt32(out.FailedRecordCount))
				return
			}
			n.Add(outageBatch)
			time.Sleep(outageTick)
		}
	}()
	time.Sleep(time.Second)
	owners := leaseOwners(t, red, group, arn)
	if gate != nil {
		gate.Shut()
	}
	o.fault(t, red, "kinesis:{"+group+":"+arn+"}:lease")
	early := make(chan []string, 1)
	if o.newcomer {
		go func() { early <- newcomerTookEarly(t, red, group, arn, owners) }()
		startStream(t, yaml, c.handler)
		if gate != nil {
			time.Sleep(o.holdersLate)
			gate.Open()
		}
	} else {
		early <- nil
	}
	time.Sleep(3 * time.Second)
	close(stop)
	require.NoError(t, <-done)

	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if d, _ := c.tally("w"); int64(d) == n.Load() {
			break
		}
	}
	// Late duplicates come within a lease period.
	time.Sleep(3 * time.Second)
	assert.Empty(t, <-early, "the newcomer took shards before the group's instances re-seeded the store")
	delivered, dups = c.tally("w")
	_, beforeDups = c.tally("before")
	assertShardOrder(t, c.col.snapshot())
	return int(n.Load()), delivered, dups, beforeDups, tokensBefore, leaseTokens(t, red, group, arn)
}

// stoppedPastTheLease kills Redis, keeps it down for twice the lease
// period (3 s) and starts it again empty.
func stoppedPastTheLease(t *testing.T, red *testenv.Redis, _ string) {
	red.Kill()
	time.Sleep(6 * time.Second)
	require.NoError(t, red.Start(t.Context()))
}

// TestIntegrationRedisBackEmptyAfterTheLease stops Redis for twice the
// lease period and brings it back empty, under load: the instances write
// back each shard's last committed position, their leases and the group
// record, so nothing is lost and at most what was in flight plus one
// commit period of reading per shard comes again; an instance that joins
// the moment Redis is back takes nothing the others still hold and starts
// nothing later than they got to.
func TestIntegrationRedisBackEmptyAfterTheLease(t *testing.T) {
	t.Parallel()
	emu := testenv.NewKinesisMock(t)
	const testLease = "  lease:\n    period: 3s\n    rebalance_period: 300ms\n"
	for _, tc := range []struct {
		name string
		run  outageRun
	}{
		{"trim-horizon", outageRun{start: "trim_horizon", lease: testLease, fault: stoppedPastTheLease}},
		{"latest", outageRun{start: "latest", lease: testLease, fault: stoppedPastTheLease}},
		{"latest-newcomer", outageRun{start: "latest", lease: testLease, fault: stoppedPastTheLease, newcomer: true}},
		// The newcomer meets the empty store before the holders can
		// reach it (half a group-check interval, 500 ms): it must wait,
		// not take shards they still read. Redis restarted, so the
		// newcomer waits until it has been up a lease period and 2 s
		// (consumer.RestartWait; docs/checkpointer.md).
		{"latest-newcomer-first", outageRun{start: "latest", lease: testLease, fault: stoppedPastTheLease, newcomer: true, holdersLate: 500 * time.Millisecond}},
		// A 30 s lease: the holders' next renewal is up to 10 s away; their
		// group check, every second, makes them re-seed within about a
		// second, and the newcomer waits for the restarted Redis to have
		// been up 32 s in any case.
		{"latest-newcomer-long-lease", outageRun{start: "latest", lease: "  lease:\n    period: 30s\n    rebalance_period: 300ms\n", fault: stoppedPastTheLease, newcomer: true}},
		{"trim-horizon-newcomer", outageRun{start: "trim_horizon", lease: testLease, fault: stoppedPastTheLease, newcomer: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			written, delivered, dups, beforeDups, _, _ := tc.run.run(t, emu, "empty-"+tc.name)
			t.Logf("%s: Redis down 6 s (2x lease), back empty: %d written under load, %d lost, %d duplicates; %d duplicates of the 400 read before",
				tc.name, written, written-delivered, dups, beforeDups)
			assert.Equal(t, written, delivered, "nothing lost")
			assert.Zero(t, beforeDups, "shards are not read again from their start")
			// In flight (one batch a shard, shard_max_in_flight 1) plus one
			// commit period (200 ms) of reading per shard: at 50 records/s
			// a shard, 10 + 10 records, on each of 4 shards.
			assert.LessOrEqual(t, dups, outageShards*20)
		})
	}
}
