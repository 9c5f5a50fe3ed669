package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redis/go-redis/v9"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// scaleKinesis is the Kinesis the scale part's inputs read: kinesalite
// behind a counting proxy, or the project's simulator (scale_sim.go),
// chosen with -kinesis.
type scaleKinesis interface {
	// Endpoint is what the inputs and the bench's own client call.
	Endpoint() string
	// CreateStream creates a stream, waits until it is ACTIVE and returns
	// its identity as the inputs key checkpoints by it (the ARN).
	CreateStream(ctx context.Context, name string, shards int) (string, error)
	// Calls counts the calls served so far by operation.
	Calls() map[string]int64
	// PID is the serving process, whose CPU is measured; 0 when it runs
	// inside the bench (its CPU is then the bench's).
	PID() int
	Close()
}

// scaleBackends start a scaleKinesis able to hold shardLimit shards.
var scaleBackends = map[string]func(ctx context.Context, shardLimit int) (scaleKinesis, error){
	"kinesalite": startKinesaliteScale,
}

func backendNames() string { return strings.Join(slices.Sorted(maps.Keys(scaleBackends)), "|") }

// kinesaliteScale is kinesalite with the counting proxy in front of it.
type kinesaliteScale struct {
	emu   *testenv.Kinesis
	calls *callCounter
}

func startKinesaliteScale(ctx context.Context, shardLimit int) (scaleKinesis, error) {
	emu, err := testenv.StartKinesaliteWith(ctx, testenv.KinesaliteOptions{ShardLimit: shardLimit})
	if err != nil {
		return nil, fmt.Errorf("starting kinesalite: %w", err)
	}
	calls, err := newCallCounter(emu.Endpoint)
	if err != nil {
		emu.Close()
		return nil, err
	}
	return &kinesaliteScale{emu: emu, calls: calls}, nil
}

func (k *kinesaliteScale) Endpoint() string { return k.calls.URL }

func (k *kinesaliteScale) CreateStream(ctx context.Context, name string, shards int) (string, error) {
	return k.emu.CreateStream(ctx, name, shards)
}

func (k *kinesaliteScale) Calls() map[string]int64 { return k.calls.snapshot() }
func (k *kinesaliteScale) PID() int                { return k.emu.Process().PID() }

func (k *kinesaliteScale) Close() {
	k.calls.Close()
	k.emu.Close()
}

// scaleClient is a Kinesis client for the bench's own calls (the keyed
// load, listing shards), through the same endpoint as the inputs.
func scaleClient(endpoint string) *kinesis.Client {
	return (&testenv.Kinesis{Endpoint: endpoint}).Client()
}

// scaleRedis is the inputs' Redis: one server, or a Cluster of three
// masters and three replicas (the default), chosen with -redis.
type scaleRedis struct {
	kind, url string
	client    redis.UniversalClient
	// nodes are every server, masters and replicas, for INFO and CPU.
	nodes []*testenv.Redis
	close func()
}

func startScaleRedis(ctx context.Context, kind string, nodeTimeout time.Duration) (*scaleRedis, error) {
	switch kind {
	case "single":
		r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
		if err != nil {
			return nil, fmt.Errorf("starting redis-server: %w", err)
		}
		return &scaleRedis{kind: "simple", url: r.URL(), client: r.Client(), nodes: []*testenv.Redis{r}, close: r.Close}, nil
	case "cluster":
		c, err := testenv.StartRedisClusterWithReplicas(ctx, testenv.ClusterOptions{NodeTimeout: nodeTimeout})
		if err != nil {
			return nil, fmt.Errorf("starting a Redis Cluster: %w", err)
		}
		return &scaleRedis{kind: "cluster", url: c.URL(), client: c.Client(), nodes: c.Nodes, close: c.Close}, nil
	}
	return nil, fmt.Errorf("-redis %q: want single or cluster", kind)
}

func (r *scaleRedis) Close() {
	_ = r.client.Close()
	r.close()
}

// nodeStats is one server's counters at one moment.
type nodeStats struct {
	addr, role string
	total      int64 // total_commands_processed
	cmds       map[string]int64
	cpu        time.Duration
}

// stats reads every node's INFO (one call per node, so the bench adds
// exactly one command per node between two readings) and CPU time.
func (r *scaleRedis) stats(ctx context.Context) ([]nodeStats, error) {
	out := make([]nodeStats, len(r.nodes))
	for i, n := range r.nodes {
		c := n.Client()
		info, err := c.Info(ctx, "stats", "commandstats", "replication").Result()
		_ = c.Close()
		if err != nil {
			return nil, fmt.Errorf("reading INFO of %s: %w", n.Addr, err)
		}
		st := nodeStats{addr: n.Addr, cmds: map[string]int64{}}
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
				st.total, _ = strconv.ParseInt(v, 10, 64)
			}
			if v, ok := strings.CutPrefix(line, "role:"); ok {
				st.role = v
			}
			if name, rest, ok := strings.Cut(line, ":calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				st.cmds[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(calls, 10, 64)
			}
		}
		if st.cpu, err = procCPU(n.Process().PID()); err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}
