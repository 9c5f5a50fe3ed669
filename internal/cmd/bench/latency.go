package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/input"
)

func init() {
	parts["latency"] = part{
		summary: "delivery latency (put -> pipeline) of polling vs enhanced fan-out, on kinesis-mock",
		run:     runLatency,
	}
}

type latencyFlags struct {
	rate     int
	duration time.Duration
	shards   int
}

// runLatency writes records at a steady low rate and reads them with two
// inputs at once, one polling and one with enhanced fan-out (different
// groups), each into a consumer that notes when every record reached it.
// A record carries the time it was put, so the latency of each is the time
// from just before PutRecord to the moment its batch reached the pipeline.
func runLatency(ctx context.Context, args []string) error {
	var f latencyFlags
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	fs.IntVar(&f.rate, "rate", 10, "records written per second")
	fs.DurationVar(&f.duration, "duration", time.Minute, "how long to write (after a warm-up)")
	fs.IntVar(&f.shards, "shards", 2, "shards of the stream")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env, err := startEnv(ctx, envOptions{mock: true, redis: true})
	if err != nil {
		return err
	}
	defer env.Close()
	emu, red := env.emu, env.red
	// Enhanced fan-out runs over kinesis-mock's TLS port (HTTP/2): trust
	// its test CA and read its subscriptions without the initial-response
	// event it omits.
	os.Setenv("AWS_CA_BUNDLE", emu.CAFile)
	os.Setenv(input.EnvEmulatorNoInitialResponse, "true")

	const stream = "bench-latency"
	if _, err := emu.CreateStream(ctx, stream, f.shards); err != nil {
		return err
	}
	sides := []*latencySide{
		{name: "polling (defaults)", endpoint: emu.Endpoint, group: "polling"},
		{name: "enhanced fan-out", endpoint: emu.TLSEndpoint, group: "fan-out", extra: "  enhanced_fan_out: { enabled: true }\n"},
	}
	for _, s := range sides {
		if err := s.start(ctx, stream, red.URL()); err != nil {
			return err
		}
		defer s.stop()
	}
	c := emu.Client()
	put := func(seq uint64) error {
		data := make([]byte, 16)
		binary.BigEndian.PutUint64(data, seq)
		binary.BigEndian.PutUint64(data[8:], uint64(time.Now().UnixNano()))
		_, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String(fmt.Sprint(seq)), Data: data})
		return err
	}

	// Warm up until both sides read every shard; latencies before that
	// are start-up, not delivery.
	fmt.Fprintln(os.Stderr, "bench latency: warming up...")
	var seq uint64
	warm := time.NewTicker(200 * time.Millisecond)
	defer warm.Stop()
	deadline := time.Now().Add(2 * time.Minute)
	for !sides[0].sawAll(seq) || !sides[1].sawAll(seq) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the inputs did not start reading within 2 minutes (polling saw %d, fan-out %d records)", sides[0].count(), sides[1].count())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-warm.C:
		}
		seq++
		if err := put(seq); err != nil {
			return fmt.Errorf("writing: %w", err)
		}
	}
	first := seq + 1
	for _, s := range sides {
		s.reset(first)
	}

	fmt.Fprintf(os.Stderr, "bench latency: writing %d records/s for %v...\n", f.rate, f.duration)
	tick := time.NewTicker(time.Second / time.Duration(f.rate))
	defer tick.Stop()
	end := time.Now().Add(f.duration)
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		seq++
		if err := put(seq); err != nil {
			return fmt.Errorf("writing: %w", err)
		}
	}
	n := int(seq - first + 1)
	wait := time.Now().Add(30 * time.Second)
	for (sides[0].count() < n || sides[1].count() < n) && time.Now().Before(wait) {
		time.Sleep(100 * time.Millisecond)
	}

	fmt.Printf("latency: record put -> handed to the pipeline; %d records at %d/s over %d shards, kinesis-mock\n", n, f.rate, f.shards)
	fmt.Printf("%-20s %8s %10s %10s %10s %10s\n", "", "records", "p50", "p90", "p99", "max")
	for _, s := range sides {
		l := s.latencies()
		if len(l) == 0 {
			fmt.Printf("%-20s %8d\n", s.name, 0)
			continue
		}
		fmt.Printf("%-20s %8d %10s %10s %10s %10s\n", s.name, len(l), pct(l, 50), pct(l, 90), pct(l, 99), l[len(l)-1].Round(time.Millisecond))
	}
	if a, b := sides[0].latencies(), sides[1].latencies(); len(a) > 0 && len(b) > 0 {
		fmt.Printf("%-20s %8s %9.2fx %9.2fx %9.2fx\n", "ratio fan-out/poll", "",
			float64(pct(b, 50))/float64(pct(a, 50)), float64(pct(b, 90))/float64(pct(a, 90)), float64(pct(b, 99))/float64(pct(a, 99)))
	}
	return nil
}

// pct is the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	i := min(len(sorted)-1, (len(sorted)*p+99)/100-1)
	return sorted[max(i, 0)].Round(time.Millisecond)
}

// latencySide is one input and what it saw.
type latencySide struct {
	name, endpoint, group, extra string
	stream                       *service.Stream
	done                         chan error

	mu   sync.Mutex
	seen map[uint64]time.Duration
	from uint64 // records before it were written during the warm-up
}

func (s *latencySide) start(ctx context.Context, stream, redisURL string) error {
	s.seen = map[uint64]time.Duration{}
	b := service.NewStreamBuilder()
	if err := b.SetLoggerYAML("level: warn"); err != nil {
		return err
	}
	err := b.AddInputYAML(fmt.Sprintf(`
kinesis:
  streams: [ %s ]
  region: %s
  endpoint: %s
  credentials: { id: %s, secret: %s }
  checkpoint:
    redis: { url: %s }
    group: %s
%s`, stream, testenv.Region, s.endpoint, testenv.AccessKey, testenv.SecretKey, redisURL, s.group, s.extra))
	if err != nil {
		return err
	}
	if err := b.AddBatchConsumerFunc(func(_ context.Context, batch service.MessageBatch) error {
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range batch {
			data, err := m.AsBytes()
			if err != nil || len(data) != 16 {
				continue
			}
			seq := binary.BigEndian.Uint64(data)
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(data[8:])))
			if _, dup := s.seen[seq]; !dup && seq >= s.from {
				s.seen[seq] = now.Sub(sent)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if s.stream, err = b.Build(); err != nil {
		return err
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.stream.Run(ctx) }()
	return nil
}

func (s *latencySide) stop() {
	_ = s.stream.StopWithin(30 * time.Second)
	<-s.done
}

// sawAll reports whether the side saw the ten records written before the
// last 15 (3 s at the warm-up's pace, time for them to arrive).
func (s *latencySide) sawAll(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq < 30 {
		return false
	}
	for i := seq - 24; i <= seq-15; i++ {
		if _, ok := s.seen[i]; !ok {
			return false
		}
	}
	return true
}

// reset forgets the warm-up: only records from `from` on count.
func (s *latencySide) reset(from uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen, s.from = map[uint64]time.Duration{}, from
}

func (s *latencySide) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// latencies returns what the side measured, sorted.
func (s *latencySide) latencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(s.seen))
	for _, d := range s.seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}
