package checkpointer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	for _, n := range []int{16, 256} {
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
