package main

import (
	"context"
	"flag"
	"fmt"
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

// The few-keys ceiling. With order kept, a request holds each partition key
// once and two requests in flight never hold the same key, so a key that is
// in every batch lands one record (or one aggregated record) per round
// trip: at 30 ms about 33 records/s per hot key, whatever the shards or
// max_in_flight. This part shows that ceiling before a user meets it: the
// records/s of an ordered output, an ordered one with aggregation, and an
// unordered one, by the number of distinct keys and the round-trip time.

func init() {
	parts["keys"] = part{
		summary: "records/s by distinct partition keys (1, 4, 64, 1024) and added latency (0, 30 ms): ordered, ordered + aggregation, unordered",
		run:     runKeys,
	}
}

type keysFlags struct {
	keys, latencies    string
	shards, size       int
	warm, window       time.Duration
	concurrency, feeds int
}

func runKeys(ctx context.Context, args []string) error {
	var f keysFlags
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.StringVar(&f.keys, "keys", "1,4,64,1024", "comma-separated numbers of distinct partition keys")
	fs.StringVar(&f.latencies, "latency", "0s,30ms", "comma-separated latencies the proxy adds to every request")
	fs.IntVar(&f.shards, "shards", 4, "shards of the stream")
	fs.IntVar(&f.size, "size", 200, "bytes of data per record")
	fs.IntVar(&f.concurrency, "concurrency", 64, "max_in_flight of the output")
	fs.IntVar(&f.feeds, "feeders", 128, "goroutines feeding the output batches of 500")
	fs.DurationVar(&f.warm, "warm", time.Second, "time each cell runs before it is measured")
	fs.DurationVar(&f.window, "window", 3*time.Second, "time each cell is measured")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var keys []int
	for _, s := range strings.Split(f.keys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-keys %q: want positive integers", s)
		}
		keys = append(keys, n)
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
	const stream = "bench-keys"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return err
	}
	listing, err := kinesisx.ListAllShards(ctx, emu.Client(), stream)
	if err != nil {
		return err
	}
	shards, err := producer.NewShardMap(listing)
	if err != nil {
		return err
	}

	modes := []pluginMode{
		{name: "ordered", fields: "preserve_order: true"},
		{name: "ordered + aggregation", fields: "preserve_order: true\naggregation: {enabled: true}"},
		{name: "unordered", fields: "preserve_order: false"},
	}
	fmt.Printf("keys: records/s written by distinct partition keys and added latency; %d shards, %d B records, max_in_flight %d,\n", f.shards, f.size, f.concurrency)
	fmt.Printf("default batching (500 / 50ms), fed batches of 500 from %d goroutines; each cell %v after %v of warm-up; PutRecords answered by the proxy\n\n", f.feeds, f.window, f.warm)
	header := fmt.Sprintf("| keys | latency | %s |", strings.Join(names(modes), " | "))
	fmt.Println(header)
	fmt.Println("|" + strings.Repeat("---|", 2+len(modes)))
	for _, lat := range latencies {
		proxy, err := faultproxy.Start(emu.Endpoint, 1)
		if err != nil {
			return err
		}
		proxy.Set(faultproxy.AllOperations, faultproxy.Rule{Latency: lat})
		proxy.Set("PutRecords", faultproxy.Rule{Latency: lat, Hook: acceptAll(shards)})
		for _, k := range keys {
			row := fmt.Sprintf("| %d | %v |", k, lat)
			for _, m := range modes {
				m.stream = stream
				rate, err := keysCell(ctx, proxy.URL, m, k, f)
				if err != nil {
					proxy.Close()
					return fmt.Errorf("%d keys, %v, %s: %w", k, lat, m.name, err)
				}
				row += fmt.Sprintf(" %.0f |", rate)
			}
			fmt.Println(row)
		}
		proxy.Close()
	}
	return nil
}

func names(modes []pluginMode) []string {
	var out []string
	for _, m := range modes {
		out = append(out, m.name)
	}
	return out
}

// keysWritten counts the user records every kinesis output of the keys part
// wrote (kinesis_output_records_total), read through its metrics exporter.
var keysWritten atomic.Int64

func init() {
	service.MustRegisterMetricsExporter("bench_keys", service.NewConfigSpec(),
		func(*service.ParsedConfig, *service.Logger) (service.MetricsExporter, error) {
			return keysExporter{}, nil
		})
}

type keysExporter struct{}

type keysCounter struct{ count bool }

func (c keysCounter) Incr(n int64) {
	if c.count {
		keysWritten.Add(n)
	}
}

type noTimer struct{}

func (noTimer) Timing(int64) {}

type noGauge struct{}

func (noGauge) Set(int64) {}

func (keysExporter) NewCounterCtor(name string, _ ...string) service.MetricsExporterCounterCtor {
	return func(...string) service.MetricsExporterCounter {
		return keysCounter{count: name == producer.MetricRecords}
	}
}

func (keysExporter) NewTimerCtor(string, ...string) service.MetricsExporterTimerCtor {
	return func(...string) service.MetricsExporterTimer { return noTimer{} }
}

func (keysExporter) NewGaugeCtor(string, ...string) service.MetricsExporterGaugeCtor {
	return func(...string) service.MetricsExporterGauge { return noGauge{} }
}

func (keysExporter) Close(context.Context) error { return nil }

// keysCell runs one cell: the output in mode fed batches of records keyed
// by their number modulo keys, and returns the user records it wrote per
// second during the window. A cell with one hot key may hold batches that
// take minutes to finish, so the stream is then stopped hard.
func keysCell(ctx context.Context, endpoint string, mode pluginMode, keys int, f keysFlags) (float64, error) {
	b := service.NewStreamBuilder()
	// The cell ends by cancelling writes in flight, which log errors.
	if err := b.SetLoggerYAML("level: none"); err != nil {
		return 0, err
	}
	if err := b.SetMetricsYAML("bench_keys: {}"); err != nil {
		return 0, err
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
		return 0, err
	}
	produce, err := b.AddBatchProducerFunc()
	if err != nil {
		return 0, err
	}
	s, err := b.Build()
	if err != nil {
		return 0, err
	}
	cellCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(cellCtx) }()

	data := payload(f.size)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range f.feeds {
		wg.Go(func() {
			for cellCtx.Err() == nil {
				start := int(next.Add(kinesisx.MaxPutRecordsCount)) - kinesisx.MaxPutRecordsCount
				batch := make(service.MessageBatch, 0, kinesisx.MaxPutRecordsCount)
				for i := start; i < start+kinesisx.MaxPutRecordsCount; i++ {
					m := service.NewMessage(data)
					m.MetaSetMut("key", "user-"+strconv.Itoa(i%keys))
					batch = append(batch, m)
				}
				_ = produce(cellCtx, batch)
			}
		})
	}
	select {
	case <-time.After(f.warm):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	before, start := keysWritten.Load(), time.Now()
	select {
	case <-time.After(f.window):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	rate := float64(keysWritten.Load()-before) / time.Since(start).Seconds()
	cancel()
	_ = s.StopWithin(time.Second)
	<-runErr
	wg.Wait()
	return rate, nil
}
