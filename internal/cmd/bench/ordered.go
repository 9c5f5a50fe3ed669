package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
	"github.com/connect-kinesis/connect-kinesis/internal/producer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func init() {
	parts["ordered"] = part{
		summary: "the kinesis output ordered vs unordered at real round-trip times (30 ms and 100 ms per request, through the fault proxy), plain and aggregated, on kinesalite",
		run:     runOrdered,
	}
}

type orderedFlags struct {
	records, size, shards, concurrency, keys int
	rounds, feeders                          int
	latencies, cpuProfile                    string
}

// runOrdered measures what keeping each key's order costs once a request
// takes as long as it does against Kinesis: kinesalite answers in
// microseconds, so the fault proxy holds every request for a fixed time
// before forwarding it. Each latency and aggregation setting compares the
// output with `preserve_order: false` (the baseline), with
// `preserve_order: true` and its defaults (batches numbered as they are
// formed, max_in_flight of them at once), and with `preserve_order: true`
// taking one batch at a time with batching sized by the shard count, in
// rounds that rotate which goes first.
func runOrdered(ctx context.Context, args []string) error {
	var f orderedFlags
	fs := flag.NewFlagSet("ordered", flag.ContinueOnError)
	// A round holds six of the sized side's batches (500 records per
	// shard on 64 shards).
	fs.IntVar(&f.records, "n", 576000, "records to write on each side, over all rounds")
	fs.IntVar(&f.size, "size", 200, "bytes of data per record")
	fs.IntVar(&f.shards, "shards", 64, "shards of each stream")
	fs.IntVar(&f.concurrency, "concurrency", 64, "max_in_flight of the output")
	// The feeders stand for an input that keeps messages in flight until
	// they are acknowledged. Twice the output's window lets the next
	// batches form while the current ones are written, as with any input
	// allowed more in flight than the output writes at once; with exactly
	// the window, the shard-sized side's single batch holds every message
	// in flight and its next batch cannot start before the round trip ends.
	fs.IntVar(&f.feeders, "feeders", 0, "goroutines feeding the output batches of 500, each waiting for its batch's ack (0: twice -concurrency)")
	fs.IntVar(&f.keys, "keys", 100000, "distinct partition keys, taken in turn")
	fs.IntVar(&f.rounds, "rounds", 3, "alternating rounds each side's records are split into")
	fs.StringVar(&f.latencies, "latency", "30ms,100ms", "comma-separated latencies the proxy adds to every request")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured rounds to this file (samples labelled side=unordered|ordered|ordered, sized)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.feeders <= 0 {
		f.feeders = 2 * f.concurrency
	}
	if f.rounds < 1 || f.records < f.rounds {
		return fmt.Errorf("-rounds %d: must be at least 1 and at most -n (%d)", f.rounds, f.records)
	}
	var latencies []time.Duration
	for _, s := range strings.Split(f.latencies, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-latency %q: %w", s, err)
		}
		latencies = append(latencies, d)
	}

	emu, err := testenv.StartKinesalite(ctx)
	if err != nil {
		return fmt.Errorf("starting kinesalite: %w", err)
	}
	defer emu.Close()
	setBenchCredentials()

	stopProfile, err := startCPUProfile(f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()

	per := f.records / f.rounds
	fmt.Printf("ordered vs unordered output: %d records x %d B per side, %d shards (kinesalite), PutRecords answered by a proxy after a fixed latency,\n", per*f.rounds, f.size, f.shards)
	fmt.Printf("max_in_flight %d, fed batches of 500 from %d goroutines, %d partition keys; medians of %d alternating rounds of %d\n\n", f.concurrency, f.feeders, f.keys, f.rounds, per)
	// kinesalite stores about 3,700 records/s over 64 shards on a 2-core
	// machine, less than either side writes at these latencies, so the
	// proxy answers PutRecords itself, each record on the shard its key
	// maps to, as Kinesis would. The other calls reach kinesalite.
	if _, err := emu.CreateStream(ctx, "bench-ordered-map", f.shards); err != nil {
		return err
	}
	listing, err := kinesisx.ListAllShards(ctx, emu.Client(), "bench-ordered-map")
	if err != nil {
		return err
	}
	shards, err := producer.NewShardMap(listing)
	if err != nil {
		return err
	}
	for _, lat := range latencies {
		proxy, err := faultproxy.Start(emu.Endpoint, 1)
		if err != nil {
			return err
		}
		proxy.Set(faultproxy.AllOperations, faultproxy.Rule{Latency: lat})
		proxy.Set("PutRecords", faultproxy.Rule{Latency: lat, Hook: acceptAll(shards)})
		for _, agg := range []bool{false, true} {
			modes := []pluginMode{
				{name: "unordered", fields: "preserve_order: false"},
				{name: "ordered", fields: "preserve_order: true"},
				{name: "one at a time", fields: "preserve_order: true\nordered_batches_in_flight: 1\n" + shardSizedBatching(f.shards)},
			}
			title := fmt.Sprintf("%v per request, plain records:", lat)
			if agg {
				title = fmt.Sprintf("%v per request, aggregated:", lat)
			}
			for i := range modes {
				if agg {
					modes[i].fields += "\naggregation: {enabled: true}"
				}
				modes[i].stream = fmt.Sprintf("bench-ordered-%d-%t-%d", lat.Milliseconds(), agg, i)
				if _, err := emu.CreateStream(ctx, modes[i].stream, f.shards); err != nil {
					proxy.Close()
					return err
				}
			}
			rounds := make([][]measurement, len(modes))
			for r := range f.rounds {
				for j := range modes {
					i := (r + j) % len(modes)
					var m measurement
					var err error
					pprof.Do(ctx, pprof.Labels("side", modes[i].name), func(ctx context.Context) {
						m, err = measureUntil(per, func(mark func()) error { return keyedPut(ctx, proxy.URL, modes[i], r*per, per, f, mark) })
					})
					if err != nil {
						proxy.Close()
						return fmt.Errorf("%s, round %d, %s: %w", title, r+1, modes[i].name, err)
					}
					rounds[i] = append(rounds[i], m)
				}
			}
			printComparison(title+" the defaults (batches numbered as formed, max_in_flight at once):", modes[0].name, modes[1].name, median(rounds[0]), median(rounds[1]), 0.8, 0)
			fmt.Println()
			printComparison(title+" one batch at a time (ordered_batches_in_flight: 1), batching sized by the shard count:", modes[0].name, modes[2].name, median(rounds[0]), median(rounds[2]), 0, 0)
			fmt.Println()
		}
		proxy.Close()
	}
	return nil
}

// shardSizedBatching is the output's batching by the rule of
// docs/performance.md for an ordered output that takes one batch at a time
// (ordered_batches_in_flight: 1): a batch fills a request for every shard,
// so one round trip carries what the unordered output spreads over as many
// batches.
func shardSizedBatching(shards int) string {
	return fmt.Sprintf("batching: {count: %d, byte_size: %d, period: 1s}", kinesisx.MaxPutRecordsCount*shards, shards<<20)
}

// keyedPut writes records from `from` on through a Benthos stream into the
// kinesis output, fed batches of 500 messages from f.feeders goroutines,
// each message keyed by its number modulo f.keys (a population of users).
// The feeders go on past the n records measured, as a live input would, and
// stop once mark has been called when all n are acknowledged: a finite input
// would end each side with a batch short of its count, which then waits for
// the batching period (up to a second with batching sized by the shard
// count), a wait no continuous stream has.
func keyedPut(ctx context.Context, endpoint string, mode pluginMode, from, n int, f orderedFlags, mark func()) error {
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: warn"); err != nil {
		return err
	}
	err := b.AddOutputYAML(fmt.Sprintf(`
kinesis:
  stream: %s
  endpoint: %s
  partition_key: ${! meta("key") }
  max_in_flight: %d
  %s
`, mode.stream, endpoint, f.concurrency, strings.ReplaceAll(mode.fields, "\n", "\n  ")))
	if err != nil {
		return err
	}
	produce, err := b.AddBatchProducerFunc()
	if err != nil {
		return err
	}
	s, err := b.Build()
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()

	data := payload(f.size)
	var (
		next     atomic.Int64 // the first record of the next batch to feed
		measured atomic.Int64 // records below n acknowledged
		done     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range f.feeders {
		wg.Go(func() {
			for !done.Load() {
				start := int(next.Add(kinesisx.MaxPutRecordsCount)) - kinesisx.MaxPutRecordsCount
				end := start + kinesisx.MaxPutRecordsCount
				if start < n {
					end = min(end, n)
				}
				batch := make(service.MessageBatch, 0, end-start)
				for i := start; i < end; i++ {
					m := service.NewMessage(data)
					m.MetaSetMut("key", "user-"+strconv.Itoa((from+i)%f.keys))
					batch = append(batch, m)
				}
				err := produce(ctx, batch)
				if start >= n {
					continue // past the measured records: only keeps the output busy
				}
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					done.Store(true)
					return
				}
				if measured.Add(int64(end-start)) == int64(n) {
					mark()
					done.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if err := s.StopWithin(30 * time.Second); err != nil {
		firstErr = errors.Join(firstErr, err)
	}
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		firstErr = errors.Join(firstErr, err)
	}
	return firstErr
}

// setBenchCredentials points the plugin's default credential chain at the
// emulator's.
func setBenchCredentials() {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey,
		"AWS_REGION": testenv.Region, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		_ = os.Setenv(k, v)
	}
}

// acceptAll answers a PutRecords request as Kinesis does when it takes
// every record: each on the shard its hash key (the MD5 of its partition
// key, or its explicit hash key) falls in.
func acceptAll(shards *producer.ShardMap) func(op string, body []byte) *faultproxy.Response {
	var seq atomic.Int64
	return func(_ string, body []byte) *faultproxy.Response {
		var in struct {
			Records []struct {
				PartitionKey    string
				ExplicitHashKey string
			}
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return &faultproxy.Response{Status: 400, Body: []byte(`{"__type":"SerializationException"}`)}
		}
		out := []byte(`{"FailedRecordCount":0,"Records":[`)
		for i, r := range in.Records {
			if i > 0 {
				out = append(out, ',')
			}
			shard := shards.ShardFor(producer.Entry{PartitionKey: r.PartitionKey, ExplicitHashKey: r.ExplicitHashKey})
			out = fmt.Appendf(out, `{"SequenceNumber":"%d","ShardId":"%s"}`, seq.Add(1), shard)
		}
		out = append(out, "]}"...)
		return &faultproxy.Response{Status: 200, Body: out}
	}
}
