package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/awsconf"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// The children of the process case: the raw SDK loop, and the profiles of a
// pipeline process taken through Benthos' debug endpoints.

// runRawLoop is the raw SDK loop as a process of its own: n records of size
// bytes, keys partition keys taken in turn, requests of 500 from concurrency
// workers, the SDK's own request serializer.
func runRawLoop(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rawloop", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "Kinesis endpoint")
	stream := fs.String("stream", "", "stream")
	n := fs.Int("n", 200000, "records")
	size := fs.Int("size", 200, "bytes per record")
	keys := fs.Int("keys", 64, "partition keys")
	concurrency := fs.Int("concurrency", 64, "requests in flight")
	if err := fs.Parse(args); err != nil {
		return err
	}
	settings := awsconf.Settings{Region: testenv.Region, Endpoint: *endpoint, ID: testenv.AccessKey, Secret: testenv.SecretKey}
	cfg, err := settings.Load(ctx)
	if err != nil {
		return err
	}
	c := settings.KinesisClient(cfg)
	data := payload(*size)
	names := make([]string, *keys)
	for k := range names {
		names[k] = fmt.Sprint(k)
	}
	return inBatches(*n, *concurrency, func(start, end int) error {
		entries := make([]types.PutRecordsRequestEntry, 0, end-start)
		for i := start; i < end; i++ {
			entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: &names[i%*keys]})
		}
		for len(entries) > 0 {
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(*stream), Records: entries})
			if err != nil {
				return err
			}
			var again []types.PutRecordsRequestEntry
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					again = append(again, entries[i])
				}
			}
			entries = again
		}
		return nil
	})
}

// debugPort serves the profiled process' pprof endpoints.
const debugPort = 4196

// heapAtPeak follows the RSS of process pid and, when it stops growing
// (it is sampled every 50 ms; a run peaks while batches are in flight),
// writes a heap profile from the process' pprof endpoint, taken right
// after the highest RSS seen so far.
func heapAtPeak(ctx context.Context, pid int, path string) error {
	var best uint64
	var profile []byte
	for {
		rss, err := procRSS(pid)
		if err != nil {
			break // the process ended
		}
		if rss > best+(4<<20) {
			if b, err := fetchHeap(ctx); err == nil {
				best, profile = rss, b
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if profile == nil {
		return errors.New("no profile taken")
	}
	fmt.Fprintf(os.Stderr, "bench output: heap profile taken at RSS %.0f MiB: %s\n", mib(best), path)
	return os.WriteFile(path, profile, 0o600)
}

// profiles names the files a profiled process' profiles go to.
type profiles struct {
	heap, cpu  string
	cpuSeconds int
}

// cpuFor writes a CPU profile of the profiled process over its first
// seconds, from when its pprof endpoint first answers.
func cpuFor(ctx context.Context, path string, seconds int) error {
	for range 100 {
		b, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", debugPort, seconds))
		if err == nil {
			return os.WriteFile(path, b, 0o600)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("the process' pprof endpoint never answered")
}

func fetchHeap(ctx context.Context) ([]byte, error) {
	return httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", debugPort))
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
