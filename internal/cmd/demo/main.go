// Command demo runs connect-kinesis for real on this machine: it starts
// kinesis-mock and redis-server on free loopback ports, creates a stream,
// writes generated records through the `kinesis` output, reads them with two
// `kinesis` input instances sharing one checkpoint group, splits a shard while
// they run, prints `connect-kinesis checkpoints show`, and stops everything.
//
// `make demo` builds the binary and runs this.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/big"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

const stream = "demo-events"

func main() {
	bin := flag.String("bin", "bin/connect-kinesis", "the connect-kinesis binary")
	records := flag.Int("records", 600, "records to write")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *records); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin string, records int) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("finding the binary %s (run `make build`): %w", bin, err)
	}
	say("starting kinesis-mock and redis-server on free 127.0.0.1 ports")
	emu, err := testenv.StartKinesisMock(ctx)
	if err != nil {
		return err
	}
	defer emu.Close()
	red, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	if err != nil {
		return err
	}
	defer red.Close()
	say("kinesis-mock at %s, redis at %s", emu.Endpoint, red.Addr)

	if _, err := emu.CreateStream(ctx, stream, 2); err != nil {
		return err
	}
	say("created stream %s with 2 shards", stream)

	dir, err := os.MkdirTemp("", "connect-kinesis-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := append(os.Environ(),
		"KINESIS_ENDPOINT="+emu.Endpoint, "AWS_REGION="+testenv.Region,
		"AWS_ACCESS_KEY_ID="+testenv.AccessKey, "AWS_SECRET_ACCESS_KEY="+testenv.SecretKey,
		"REDIS_URL="+red.URL(), "STREAM="+stream)

	delivered := newTally()
	var consumers []*exec.Cmd
	for _, name := range []string{"consumer-a", "consumer-b"} {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf(consumerYAML, name)), 0o600); err != nil {
			return err
		}
		cmd, err := startPrinting(ctx, bin, path, env, name, delivered.add)
		if err != nil {
			return err
		}
		consumers = append(consumers, cmd)
	}
	defer func() {
		for _, c := range consumers {
			_ = c.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range consumers {
			_ = c.Wait()
		}
	}()

	producerPath := filepath.Join(dir, "producer.yaml")
	if err := os.WriteFile(producerPath, []byte(fmt.Sprintf(producerYAML, records)), 0o600); err != nil {
		return err
	}
	say("writing %d records through the kinesis output", records)
	producer := exec.CommandContext(ctx, bin, "-c", producerPath)
	producer.Env = env
	producer.Stderr = os.Stderr
	if err := producer.Start(); err != nil {
		return fmt.Errorf("starting the producer: %w", err)
	}

	// Split the first shard while records flow: the inputs must finish the
	// parent before either child is read.
	// The generator writes one record per 10ms: half way is records*5ms.
	select {
	case <-time.After(time.Duration(records) * 5 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := splitFirstShard(ctx, emu.Client()); err != nil {
		return err
	}
	if err := producer.Wait(); err != nil {
		return fmt.Errorf("the producer failed: %w", err)
	}
	say("producer done; waiting for both inputs to deliver every record")

	deadline := time.Now().Add(90 * time.Second)
	for delivered.unique() < records && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
	}
	// Let the inputs commit their last acks (commit_period is 1s here).
	time.Sleep(2 * time.Second)

	say("connect-kinesis checkpoints show")
	show := exec.CommandContext(ctx, bin, "checkpoints", "show",
		"--redis-url", red.URL(), "--group", "demo", "--stream", stream,
		"--endpoint", emu.Endpoint, "--region", testenv.Region)
	show.Env = env
	show.Stdout, show.Stderr = os.Stdout, os.Stderr
	if err := show.Run(); err != nil {
		return fmt.Errorf("checkpoints show: %w", err)
	}

	byInstance, unique, dups := delivered.summary()
	say("written %d, delivered %d unique (%d duplicates); by instance and shard: %s", records, unique, dups, byInstance)
	if unique < records {
		return fmt.Errorf("%d records were not delivered within 90s", records-unique)
	}
	say("done: stopping the inputs (they commit and release their leases), the emulator and Redis")
	return nil
}

func say(format string, args ...any) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

// startPrinting runs a consumer and prints each JSON line it writes, prefixed
// with its name, counting deliveries by event seq.
func startPrinting(ctx context.Context, bin, config string, env []string, name string, add func(key string, seq int)) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, bin, "-c", config)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			var ev struct {
				Seq   int    `json:"seq"`
				Shard string `json:"shard"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Seq > 0 {
				add(name+" "+ev.Shard, ev.Seq)
			}
			fmt.Printf("[%s] %s\n", name, line)
		}
	}()
	return cmd, nil
}

func splitFirstShard(ctx context.Context, c *kinesis.Client) error {
	shards, err := kinesisx.ListAllShards(ctx, c, stream)
	if err != nil {
		return err
	}
	if len(shards) == 0 {
		return errors.New("listing shards: none")
	}
	s := shards[0]
	lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	_, err = c.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName:         aws.String(stream),
		ShardToSplit:       s.ShardId,
		NewStartingHashKey: aws.String(mid.String()),
	})
	if err != nil {
		return fmt.Errorf("splitting %s: %w", aws.ToString(s.ShardId), err)
	}
	say("split %s into two children while records flow", aws.ToString(s.ShardId))
	return nil
}

type tally struct {
	mu   sync.Mutex
	seen map[int]int
	by   map[string]int
}

func newTally() *tally { return &tally{seen: map[int]int{}, by: map[string]int{}} }

func (t *tally) add(key string, seq int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[seq]++
	t.by[key]++
}

func (t *tally) unique() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

func (t *tally) summary() (string, int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dups := 0
	for _, n := range t.seen {
		dups += n - 1
	}
	names := slices.Sorted(maps.Keys(t.by))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("\n    %s: %d", n, t.by[n])
	}
	return strings.Join(parts, ""), len(t.seen), dups
}

const producerYAML = `
logger:
  level: warn
input:
  generate:
    count: %d
    interval: 10ms
    mapping: |
      root.seq = counter()
      root.user = "user-%%02d".format(random_int(max: 19))
      root.ts = now()
output:
  kinesis:
    stream: ${STREAM}
    partition_key: ${! json("user") }
    region: ${AWS_REGION}
    endpoint: ${KINESIS_ENDPOINT}
    batching:
      count: 20
      period: 50ms
`

const consumerYAML = `
logger:
  level: warn
http:
  enabled: false
input:
  kinesis:
    streams: [ ${STREAM} ]
    start_position: trim_horizon
    region: ${AWS_REGION}
    endpoint: ${KINESIS_ENDPOINT}
    checkpoint:
      redis:
        url: ${REDIS_URL}
      group: demo
      commit_period: 1s
    lease:
      period: 6s
      rebalance_period: 2s
    shard_discovery_interval: 2s
pipeline:
  processors:
    - mapping: |
        root = this
        root.instance = "%s"
        root.shard = @kinesis_shard
        root.sequence = @kinesis_sequence_number
output:
  stdout:
    codec: lines
`
