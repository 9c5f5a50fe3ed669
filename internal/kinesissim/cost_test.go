package kinesissim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwentyThousandEmptyShardsCostLittleMemory guards a per-shard cost
// that would make the simulator, not the connector, what a run of 20,000
// shards measures: an empty shard must cost a lock and a slice header.
//
// It is not parallel: the heap it measures must hold nothing else growing.
func TestTwentyThousandEmptyShardsCostLittleMemory(t *testing.T) {
	s, err := Start(t.Context(), Options{})
	require.NoError(t, err)
	defer s.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.NoError(t, s.CreateStream("big", 20000))
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap for 20,000 empty shards: %d KiB (%d bytes a shard)", grown>>10, grown/20000)
	assert.Less(t, grown, int64(4<<20))
	runtime.KeepAlive(s)
}

// getRecordsRequest returns a GetRecords request at an empty shard's
// TRIM_HORIZON, as the SDK sends it.
func getRecordsRequest(b *testing.B, s *Server) []byte {
	b.Helper()
	require.NoError(b, s.CreateStream("bench", 1))
	st := s.streams.Load().byName["bench"]
	it := iterator{gen: st.gen, from: st.startSeq, issued: time.Now().UnixMilli()}
	return fmt.Appendf(nil, `{"Limit":10000,"ShardIterator":%q}`, it.String())
}

// BenchmarkGetRecordsEmptyShard is the server's own cost of a GetRecords
// on an empty shard: the handler from its request to its answer, without
// the network or HTTP parsing.
// Run with -cpu 1 for one core's rate.
func BenchmarkGetRecordsEmptyShard(b *testing.B) {
	s, err := Start(b.Context(), Options{})
	require.NoError(b, err)
	defer s.Close()
	body := getRecordsRequest(b, s)
	b.ReportAllocs()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header.Set("X-Amz-Target", targetPrefix+"GetRecords")
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 test")
			w := discardWriter{h: http.Header{}}
			s.ServeHTTP(&w, req)
			if w.code != http.StatusOK {
				b.Fatalf("status %d", w.code)
			}
		}
	})
}

// BenchmarkGetRecordsEmptyShardHTTP is a GetRecords on an empty shard
// over loopback HTTP/1.1 with keep-alive, client and server in this
// process, 64 calls in flight: with -cpu 1 both share the core, so the
// rate is a lower bound of what one core serves.
func BenchmarkGetRecordsEmptyShardHTTP(b *testing.B) {
	s, err := Start(b.Context(), Options{})
	require.NoError(b, err)
	defer s.Close()
	body := getRecordsRequest(b, s)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// Many readers poll at once, as instances reading thousands of shards
	// do.
	b.SetParallelism(64)
	b.ReportAllocs()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.Endpoint(), bytes.NewReader(body))
			req.Header.Set("X-Amz-Target", targetPrefix+"GetRecords")
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 test")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// reportCPU reports the process's CPU time per call, and the calls one
// core serves a second at that cost: on a shared machine the wall time per
// call measures the other processes too.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	b.ResetTimer()
	return func() {
		b.StopTimer()
		per := float64(cpuTime()-start) / float64(b.N)
		b.ReportMetric(per, "cpu-ns/op")
		b.ReportMetric(1e9/per, "calls/cpu-s")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
