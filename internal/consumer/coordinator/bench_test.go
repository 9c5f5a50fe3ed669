package coordinator

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// BenchmarkConsumerDelivers reads 4 shards of 25,000 records each through
// the whole consumer (fakes for Kinesis and the store), acking every batch,
// and reports the process CPU time per record and records per second: the
// A/B figure of a change to the read path.
func BenchmarkConsumerDelivers(b *testing.B) {
	const shards, perShard = 4, 25000
	var cpu time.Duration
	var wall time.Duration
	for b.Loop() {
		api := consumertest.NewKinesis()
		for i := range shards {
			api.Add(fmt.Sprintf("shardId-%012d", i), &consumertest.KinesisShard{Records: perShard, Keys: 16})
		}
		cfg := consumertest.Config()
		cfg.Limit = 10000
		cfg.ShardMaxInFlight = 4
		cfg.CommitPeriod = time.Second
		c, err := New(cfg, api, func(string) consumer.Store { return consumertest.NewStore(time.Minute) }, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		before, began := cpuTime(), time.Now()
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for got := 0; got < shards*perShard; {
			batch, err := c.Next(ctx)
			if err != nil {
				b.Fatalf("after %d records: %v", got, err)
			}
			got += len(batch.Records)
			batch.Ack(nil)
		}
		cpu += cpuTime() - before
		wall += time.Since(began)
		cancel()
		_ = c.Close(context.Background())
	}
	records := float64(b.N * shards * perShard)
	b.ReportMetric(float64(cpu.Nanoseconds())/records, "cpu-ns/record")
	b.ReportMetric(records/wall.Seconds(), "records/s")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
