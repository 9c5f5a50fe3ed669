package main

import (
	"context"
	"crypto/md5"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func init() {
	parts["lanes"] = part{
		summary: "shard_parallelism 1 vs N: a pipeline that sleeps per batch, 2 shards of KPL records, on kinesalite",
		run:     runLanes,
	}
}

type lanesFlags struct {
	shards, aggregates, perAggregate, keys, lanes, limit, rounds int
	sleep                                                        time.Duration
}

// runLanes measures what shard_parallelism buys when the pipeline, not
// Kinesis, is a shard's bottleneck: every batch costs the pipeline a fixed
// time (a `sleep` on its first message), so one batch per shard in flight
// caps a shard at limit records per sleep. The records are KPL aggregates,
// so that one GetRecords answer holds many batches' worth of user records
// (as with KPL producers): without that, the 5 GetRecords calls per second
// of a shard, not the pipeline, would be the limit. Each side reads the
// whole stream with a fresh group; the rounds alternate which side goes
// first. Per-key order is checked on every delivery.
func runLanes(ctx context.Context, args []string) error {
	var f lanesFlags
	fs := flag.NewFlagSet("lanes", flag.ContinueOnError)
	fs.IntVar(&f.shards, "shards", 2, "shards of the stream")
	fs.IntVar(&f.aggregates, "aggregates", 300, "KPL aggregated records written per shard")
	fs.IntVar(&f.perAggregate, "per-aggregate", 100, "user records per aggregated record")
	fs.IntVar(&f.keys, "keys", 1000, "partition keys, spread over the shards by their hash")
	fs.IntVar(&f.lanes, "lanes", 8, "shard_parallelism of the measured side (the baseline has 1)")
	fs.IntVar(&f.limit, "limit", 100, "the input's limit: records per GetRecords call and user records per batch")
	fs.IntVar(&f.rounds, "rounds", 3, "alternating rounds; in each, every side reads the whole stream")
	fs.DurationVar(&f.sleep, "sleep", 20*time.Millisecond, "the pipeline's time per batch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	emu, err := testenv.StartKinesalite(ctx)
	if err != nil {
		return fmt.Errorf("starting kinesalite: %w", err)
	}
	defer emu.Close()
	red, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	defer red.Close()
	const stream = "bench-lanes"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return err
	}
	total := f.shards * f.aggregates * f.perAggregate
	fmt.Fprintf(os.Stderr, "bench lanes: writing %d user records in %d aggregates...\n", total, f.shards*f.aggregates)
	if err := putAggregates(ctx, emu.Client(), stream, f); err != nil {
		return fmt.Errorf("filling the stream: %w", err)
	}

	sides := []struct {
		lanes  int
		rounds []lanesRound
	}{{lanes: 1}, {lanes: f.lanes}}
	for r := range f.rounds {
		for j := range sides {
			s := &sides[(r+j)%len(sides)]
			res, err := lanesRead(ctx, emu.Endpoint, red.URL(), fmt.Sprintf("lanes-%d-%d", s.lanes, r), stream, total, s.lanes, f)
			if err != nil {
				return fmt.Errorf("round %d, shard_parallelism %d: %w", r+1, s.lanes, err)
			}
			fmt.Fprintf(os.Stderr, "round %d, shard_parallelism %d: %.0f records/s, %d order violations, %d duplicates\n", r+1, s.lanes, res.perSecond(), res.violations, res.duplicates)
			s.rounds = append(s.rounds, res)
		}
	}
	base, lanes := medianRound(sides[0].rounds), medianRound(sides[1].rounds)
	violations := 0
	for _, s := range sides {
		for _, r := range s.rounds {
			violations += r.violations
		}
	}
	ratio := lanes.perSecond() / base.perSecond()
	fmt.Printf("lanes: %d user records (%d shards, KPL aggregates of %d, %d keys), limit %d, a pipeline sleeping %v per batch, medians of %d alternating rounds\n",
		total, f.shards, f.perAggregate, f.keys, f.limit, f.sleep, f.rounds)
	fmt.Printf("%-26s %14s\n", "", "records/s")
	fmt.Printf("%-26s %14.0f\n", "shard_parallelism 1", base.perSecond())
	fmt.Printf("%-26s %14.0f\n", fmt.Sprintf("shard_parallelism %d", f.lanes), lanes.perSecond())
	fmt.Printf("%-26s %13.2fx  target >= 5x  %s\n", "ratio", ratio, verdict(ratio >= 5))
	fmt.Printf("%-26s %14d  target 0      %s\n", "per-key order violations", violations, verdict(violations == 0))
	if ratio < 5 || violations > 0 {
		return errors.New("a target was missed")
	}
	return nil
}

// lanesRound is one side's read of the whole stream.
type lanesRound struct {
	records                int
	wall                   time.Duration // first batch to last record
	violations, duplicates int
}

func (r lanesRound) perSecond() float64 { return float64(r.records) / r.wall.Seconds() }

func medianRound(rs []lanesRound) lanesRound {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b lanesRound) int { return int(a.wall - b.wall) })
	return s[len(s)/2]
}

// putAggregates writes, for each shard, aggregates of user records whose
// keys hash into that shard (a user record outside its aggregate's shard
// would be dropped as a stray), each key's data "<key>:<counter>".
func putAggregates(ctx context.Context, c *kinesis.Client, stream string, f lanesFlags) error {
	shards, err := kinesisx.ListAllShards(ctx, c, stream)
	if err != nil {
		return err
	}
	keysOf := make([][]string, len(shards))
	for k := 0; len(slices.Concat(keysOf...)) < f.keys; k++ {
		key := "key-" + strconv.Itoa(k)
		sum := md5.Sum([]byte(key))
		h := new(big.Int).SetBytes(sum[:])
		for i, s := range shards {
			lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
			hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
			if h.Cmp(lo) >= 0 && h.Cmp(hi) <= 0 {
				keysOf[i] = append(keysOf[i], key)
			}
		}
	}
	counter := map[string]int{}
	for i := range shards {
		var entries []types.PutRecordsRequestEntry
		for a := range f.aggregates {
			subs := make([]kpl.Record, f.perAggregate)
			for j := range subs {
				key := keysOf[i][(a*f.perAggregate+j)%len(keysOf[i])]
				counter[key]++
				subs[j] = kpl.Record{PartitionKey: key, Data: []byte(key + ":" + strconv.Itoa(counter[key]))}
			}
			entries = append(entries, types.PutRecordsRequestEntry{Data: kpl.Encode(subs), PartitionKey: aws.String(subs[0].PartitionKey)})
		}
		// One request at a time, so each shard's aggregates land in order.
		for start := 0; start < len(entries); start += kinesisx.MaxPutRecordsCount {
			req := entries[start:min(start+kinesisx.MaxPutRecordsCount, len(entries))]
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: req})
			if err != nil {
				return err
			}
			if n := aws.ToInt32(out.FailedRecordCount); n > 0 {
				return fmt.Errorf("%d aggregates refused", n)
			}
		}
	}
	return nil
}

// lanesRead runs the input with shard_parallelism lanes through a
// pipeline that sleeps f.sleep per batch, until every record arrived, and
// checks per-key order on the way.
func lanesRead(ctx context.Context, endpoint, redisURL, group, stream string, n, lanes int, f lanesFlags) (lanesRound, error) {
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: warn"); err != nil {
		return lanesRound{}, err
	}
	// Enough pipeline threads for every batch in flight on either side:
	// with fewer, the threads, not the lanes, would be the limit.
	b.SetThreads(f.shards * f.lanes)
	err := b.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ %s ]
  region: %s
  endpoint: %s
  credentials: { id: %s, secret: %s }
  checkpoint:
    redis: { url: %s }
    group: %s
  limit: %d
  shard_parallelism: %d
`, stream, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, group, f.limit, lanes))
	if err != nil {
		return lanesRound{}, err
	}
	if err := b.AddProcessorYAML(fmt.Sprintf(`sleep: { duration: '${! if batch_index() == 0 { "%v" } else { "0s" } }' }`, f.sleep)); err != nil {
		return lanesRound{}, err
	}
	var (
		mu    sync.Mutex
		res   lanesRound
		start time.Time
		last  = map[string]int{}
		seen  = map[string]bool{}
	)
	done := make(chan struct{})
	if err := b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		if start.IsZero() {
			start = time.Now()
		}
		for _, m := range batch {
			data, _ := m.AsBytes()
			if seen[string(data)] {
				res.duplicates++
				continue
			}
			seen[string(data)] = true
			key, num, _ := strings.Cut(string(data), ":")
			c, _ := strconv.Atoi(num)
			if c < last[key] {
				res.violations++
			}
			last[key] = max(last[key], c)
		}
		if len(seen) == n && res.wall == 0 {
			res.records, res.wall = n, time.Since(start)
			close(done)
		}
		return nil
	}); err != nil {
		return lanesRound{}, err
	}
	s, err := b.Build()
	if err != nil {
		return lanesRound{}, err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	select {
	case <-done:
	case err := <-runErr:
		return lanesRound{}, fmt.Errorf("the stream ended early: %v", err)
	case <-ctx.Done():
		return lanesRound{}, ctx.Err()
	}
	if err := s.StopWithin(30 * time.Second); err != nil {
		return lanesRound{}, err
	}
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return lanesRound{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return res, nil
}
