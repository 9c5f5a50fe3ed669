package checkpointer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// BenchmarkIntegrationDeliveredMark measures one WriteDelivered call (the
// redelivery mark of all of an owner's shards, every shard's position new,
// so each one is written) on a local redis-server, against two baselines
// in the same run: a PING (one round trip) and a Commit of one shard. It
// reports redis-server CPU per call (server-us/op, from INFO cpu) besides
// the client's ns/op.
func BenchmarkIntegrationDeliveredMark(b *testing.B) {
	r := testenv.NewRedis(b)
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group, cfg.LeasePeriod = r.URL(), "bench", time.Hour
	c, err := New(b.Context(), cfg, nil, nil)
	require.NoError(b, err)
	b.Cleanup(func() { _ = c.Close() })
	s := c.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/bench")
	_, err = s.Join(b.Context())
	require.NoError(b, err)
	leases := make([]consumer.Lease, 256)
	for i := range leases {
		t, err := s.Acquire(b.Context(), fmt.Sprintf("shardId-%012d", i), "a")
		require.NoError(b, err)
		leases[i] = t.Lease
	}
	// A realistic sequence number: 56 digits, the last ones counting up.
	const base = "49590338271490256608559692538361571095921575989136"
	seq := 0
	next := func() consumer.Position {
		seq++
		return consumer.Position{Sequence: base + fmt.Sprintf("%06d", seq)}
	}
	run := func(b *testing.B, call func()) {
		call() // loads the script
		cpu0 := serverCPU(b, r)
		b.ResetTimer()
		for b.Loop() {
			call()
		}
		b.StopTimer()
		b.ReportMetric((serverCPU(b, r)-cpu0)*1e6/float64(b.N), "server-us/op")
	}

	b.Run("baseline=ping", func(b *testing.B) {
		run(b, func() { require.NoError(b, c.client.Ping(b.Context()).Err()) })
	})
	b.Run("baseline=commit-1-shard", func(b *testing.B) {
		run(b, func() { require.NoError(b, s.Commit(b.Context(), leases[0], next())) })
	})
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			marks := make([]DeliveredMark, n)
			run(b, func() {
				for i := range marks {
					marks[i] = DeliveredMark{Shard: leases[i].Shard, Token: leases[i].Token, Position: next()}
				}
				fenced, err := s.WriteDelivered(b.Context(), "a", marks)
				require.NoError(b, err)
				require.Empty(b, fenced)
			})
		})
	}
}

// serverCPU is redis-server's CPU time so far (user and system), seconds.
func serverCPU(tb testing.TB, r *testenv.Redis) float64 {
	tb.Helper()
	cl := r.Client()
	defer func(cl *redis.Client) { _ = cl.Close() }(cl)
	info, err := cl.Info(tb.Context(), "cpu").Result()
	require.NoError(tb, err)
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(tb, err)
			total += f
		}
	}
	return total
}

// BenchmarkIntegrationMarkWriter measures what the redelivery mark adds to
// delivery at the default interval: each of n shards' readers asks for a
// new position after a random pause of up to 200 ms (one poll_interval),
// as a reader that fetched records would, and waits for the write that
// covers it. One op is a 3-second session; it reports the mean and p99
// wait per ask (the latency a record gains; without the mark it is 0) and
// the write calls per second.
func BenchmarkIntegrationMarkWriter(b *testing.B) {
	r := testenv.NewRedis(b)
	for _, n := range []int{4, 16, 256} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.RedisURL, cfg.Group, cfg.LeasePeriod = r.URL(), fmt.Sprintf("bench-%d", n), time.Hour
			c, err := New(b.Context(), cfg, nil, nil)
			require.NoError(b, err)
			b.Cleanup(func() { _ = c.Close() })
			s := c.Stream("arn:aws:kinesis:us-east-1:000000000000:stream/bench")
			_, err = s.Join(b.Context())
			require.NoError(b, err)
			leases := make([]consumer.Lease, n)
			for i := range leases {
				t, err := s.Acquire(b.Context(), fmt.Sprintf("shardId-%012d", i), "a")
				require.NoError(b, err)
				leases[i] = t.Lease
			}
			w := s.NewMarkWriter("a", DefaultMarkInterval)
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			go w.Run(ctx)
			var rt roundTrips
			c.client.AddHook(&rt)
			var waits []time.Duration
			var mu sync.Mutex
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				for i, l := range leases {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
						for k := 0; time.Since(start) < 3*time.Second; k++ {
							time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
							asked := time.Now()
							p := consumer.Position{Sequence: fmt.Sprintf("%d%09d", 4959+i, start.UnixMilli()%1e9*1000+int64(k))}
							require.NoError(b, w.Cover(ctx, l, p))
							mu.Lock()
							waits = append(waits, time.Since(asked))
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			slices.Sort(waits)
			var sum time.Duration
			for _, d := range waits {
				sum += d
			}
			b.ReportMetric(float64(sum.Milliseconds())/float64(len(waits)), "wait-ms/ask")
			b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-wait-ms")
			b.ReportMetric(float64(rt.n.Load())/elapsed.Seconds(), "calls/s")
		})
	}
}

// BenchmarkIntegrationMarkWritersOfManyStreams weighs the mark writes of an
// instance reading many busy streams, one MarkWriter (one call an interval
// at most) per stream, which are not batched across streams: 100 streams
// of 4 shards, each shard's reader asking for a new position after a
// random pause of up to 200 ms (one poll_interval) and waiting for the
// write, against 1 stream of 400 shards, whose asks one writer batches. One
// op is a 3-second session; it reports the write calls per second, the
// redis-server CPU per second of wall time (server-cpu-%), this process's
// CPU per second (client-cpu-%, the asking goroutines included) and the
// mean wait per ask.
func BenchmarkIntegrationMarkWritersOfManyStreams(b *testing.B) {
	r := testenv.NewRedis(b)
	for _, shape := range []struct{ streams, shards int }{{100, 4}, {1, 400}} {
		b.Run(fmt.Sprintf("streams=%d/shards=%d", shape.streams, shape.shards), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.RedisURL, cfg.Group, cfg.LeasePeriod = r.URL(), fmt.Sprintf("bench-%d", shape.streams), time.Hour
			c, err := New(b.Context(), cfg, nil, nil)
			require.NoError(b, err)
			b.Cleanup(func() { _ = c.Close() })
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			type asker struct {
				w *MarkWriter
				l consumer.Lease
			}
			var askers []asker
			for st := range shape.streams {
				s := c.Stream(fmt.Sprintf("arn:aws:kinesis:us-east-1:000000000000:stream/bench-%d", st))
				_, err = s.Join(b.Context())
				require.NoError(b, err)
				w := s.NewMarkWriter("a", DefaultMarkInterval)
				go w.Run(ctx)
				for i := range shape.shards {
					t, err := s.Acquire(b.Context(), fmt.Sprintf("shardId-%012d", i), "a")
					require.NoError(b, err)
					askers = append(askers, asker{w, t.Lease})
				}
			}
			var rt roundTrips
			c.client.AddHook(&rt)
			var (
				mu      sync.Mutex
				waits   []time.Duration
				elapsed time.Duration
				cpu     time.Duration
				server  float64
			)
			for b.Loop() {
				server0, cpu0, start := serverCPU(b, r), processCPU(), time.Now()
				var wg sync.WaitGroup
				for i, a := range askers {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
						for k := 0; time.Since(start) < 3*time.Second; k++ {
							time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Millisecond))))
							asked := time.Now()
							p := consumer.Position{Sequence: fmt.Sprintf("%d%09d", 4959+i, start.UnixMilli()%1e9*1000+int64(k))}
							require.NoError(b, a.w.Cover(ctx, a.l, p))
							mu.Lock()
							waits = append(waits, time.Since(asked))
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				elapsed += time.Since(start)
				cpu += processCPU() - cpu0
				server += serverCPU(b, r) - server0
			}
			var sum time.Duration
			for _, d := range waits {
				sum += d
			}
			b.ReportMetric(float64(rt.n.Load())/elapsed.Seconds(), "calls/s")
			b.ReportMetric(100*server/elapsed.Seconds(), "server-cpu-%")
			b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "client-cpu-%")
			b.ReportMetric(float64(len(waits))/elapsed.Seconds(), "asks/s")
			b.ReportMetric(float64(sum.Milliseconds())/float64(len(waits)), "wait-ms/ask")
		})
	}
}

// processCPU is the CPU time this process used so far (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
