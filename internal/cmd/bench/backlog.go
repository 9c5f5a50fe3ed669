package main

import (
	"bytes"
	"cmp"
	"context"
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

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func init() {
	parts["backlog"] = part{
		summary: "peak RSS of the connect-kinesis process on a large-record backlog behind a slow pipeline, by shard count, on kinesalite",
		run:     runBacklog,
	}
}

type backlogFlags struct {
	shards   string
	records  int
	size     int
	budget   string
	runs     int
	duration time.Duration
	sleep    time.Duration
	base     string
}

func runBacklog(ctx context.Context, args []string) error {
	var f backlogFlags
	fs := flag.NewFlagSet("backlog", flag.ContinueOnError)
	fs.StringVar(&f.shards, "shards", "8,64,256", "shard counts, comma-separated")
	fs.IntVar(&f.records, "records", 2, "records per shard in the backlog")
	fs.IntVar(&f.size, "size", 900_000, "bytes of data per record")
	fs.StringVar(&f.budget, "budget", "8MiB", "max_buffered_bytes of the input (kept small so the smallest shard count's backlog exceeds it)")
	fs.IntVar(&f.runs, "runs", 3, "runs per shard count; figures are medians")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "how long each run reads the backlog")
	fs.DurationVar(&f.sleep, "sleep", time.Second, "the pipeline's sleep per batch: slower than Kinesis")
	fs.StringVar(&f.base, "base", "", "a commit to measure too, with its defaults (no max_buffered_bytes), built from git archive")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var counts []int
	for _, s := range strings.Split(f.shards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-shards %q: a list of positive counts", f.shards)
		}
		counts = append(counts, n)
	}
	dir, err := os.MkdirTemp("", "bench-backlog-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "bench backlog: building connect-kinesis...")
	bin, err := buildBinary(ctx, dir)
	if err != nil {
		return err
	}
	sides := []backlogSide{{name: "this", bin: bin, fields: "    max_buffered_bytes: " + f.budget + "\n"}}
	if f.base != "" {
		baseBin, err := buildCommit(ctx, dir, f.base)
		if err != nil {
			return err
		}
		sides = append(sides, backlogSide{name: f.base, bin: baseBin})
	}
	env, err := startEnv(ctx, envOptions{redis: true, shardLimit: slices.Max(counts) + 10})
	if err != nil {
		return err
	}
	defer env.Close()

	var rows []backlogRow
	for _, n := range counts {
		stream := fmt.Sprintf("backlog-%d", n)
		fmt.Fprintf(os.Stderr, "bench backlog: %d shards, writing %d records of %d B...\n", n, n*f.records, f.size)
		if err := fillBacklog(ctx, env.emu, stream, n, f.records, f.size); err != nil {
			return fmt.Errorf("filling %s: %w", stream, err)
		}
		row := backlogRow{shards: n, backlog: int64(n * f.records * f.size)}
		for r := range f.runs {
			for i, s := range sides {
				// Each run is a new group, so it reads the backlog from the start.
				m, err := backlogRun(ctx, dir, s, stream, fmt.Sprintf("g-%d-%d-%d", n, r, i), env.emu.Endpoint, env.red.URL(), f)
				if err == nil && m.rate == 0 {
					err = fmt.Errorf("no record passed; kinesalite's output:\n%s", env.emu.Process().Output())
				}
				if err != nil {
					return fmt.Errorf("%d shards, run %d, %s: %w", n, r+1, s.name, err)
				}
				fmt.Fprintf(os.Stderr, "bench backlog: %d shards, run %d, %s: peak RSS %.0f MiB, %.1f records/s\n", n, r+1, s.name, mib(m.peakRSS), m.rate)
				row.runs = append(row.runs, m)
			}
		}
		rows = append(rows, row)
		_, _ = env.emu.Client().DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
	}
	return printBacklog(f, sides, rows)
}

// backlogSide is one binary measured, with its input fields.
type backlogSide struct {
	name, bin, fields string
}

type backlogRun1 struct {
	peakRSS uint64
	rate    float64
}

type backlogRow struct {
	shards  int
	backlog int64
	runs    []backlogRun1 // run-major, side-minor
}

// of is the median of side i's runs.
func (r backlogRow) of(i, sides int) backlogRun1 {
	var rss []uint64
	var rate []float64
	for j := i; j < len(r.runs); j += sides {
		rss, rate = append(rss, r.runs[j].peakRSS), append(rate, r.runs[j].rate)
	}
	slices.Sort(rss)
	slices.Sort(rate)
	return backlogRun1{peakRSS: rss[len(rss)/2], rate: rate[len(rate)/2]}
}

func printBacklog(f backlogFlags, sides []backlogSide, rows []backlogRow) error {
	budget, err := parseBudget(f.budget)
	if err != nil {
		return err
	}
	fmt.Printf("backlog: %d records x %d B per shard, pipeline sleep %v per batch, output drop-like (a line per record), kinesalite, medians of %d runs of %v; max_buffered_bytes %s\n",
		f.records, f.size, f.sleep, f.runs, f.duration, f.budget)
	fmt.Printf("%-8s %12s", "shards", "backlog MiB")
	for _, s := range sides {
		fmt.Printf(" %20s %14s", s.name+" peak RSS MiB", "records/s")
	}
	fmt.Println()
	for _, r := range rows {
		fmt.Printf("%-8d %12.0f", r.shards, float64(r.backlog)/(1<<20))
		for i := range sides {
			m := r.of(i, len(sides))
			fmt.Printf(" %20.0f %14.1f", mib(m.peakRSS), m.rate)
		}
		fmt.Println()
	}
	limit := uint64(budget) + 100<<20
	var failed []string
	for _, r := range rows {
		if m := r.of(0, len(sides)); m.peakRSS > limit {
			failed = append(failed, fmt.Sprintf("%d shards: peak RSS %.0f MiB above budget + 100 MiB (%.0f MiB)", r.shards, mib(m.peakRSS), mib(limit)))
		}
	}
	first, last := rows[0].of(0, len(sides)), rows[len(rows)-1].of(0, len(sides))
	flat := float64(last.peakRSS) / float64(first.peakRSS)
	fmt.Printf("target: peak RSS <= budget + 100 MiB (%.0f MiB) at every shard count; %d -> %d shards: %.2fx (target <= 1.30x)\n", mib(limit), rows[0].shards, rows[len(rows)-1].shards, flat)
	if flat > 1.3 {
		failed = append(failed, fmt.Sprintf("peak RSS grew %.2fx from %d to %d shards", flat, rows[0].shards, rows[len(rows)-1].shards))
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// parseBudget reads the -budget flag as the input would, for the target.
func parseBudget(s string) (int64, error) {
	units := map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	for u, m := range units {
		if v, ok := strings.CutSuffix(s, u); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n * m, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// fillBacklog creates stream with n shards and writes records of size
// bytes to each shard, by explicit hash key.
func fillBacklog(ctx context.Context, emu *testenv.Kinesis, stream string, n, records, size int) error {
	if _, err := emu.CreateStream(ctx, stream, n); err != nil {
		return err
	}
	c := emu.Client()
	data := bytes.Repeat([]byte("x"), size)
	step := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(int64(n)))
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
		mu    sync.Mutex
		first error
	)
	put := func(fn func() error) {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := fn(); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}()
	}
	for shard := range n {
		hash := new(big.Int).Add(new(big.Int).Mul(step, big.NewInt(int64(shard))), big.NewInt(1)).String()
		for start := 0; start < records; start += 4 { // at most 5 MiB per PutRecords
			put(func() error {
				var entries []types.PutRecordsRequestEntry
				for i := start; i < min(start+4, records); i++ {
					entries = append(entries, types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprintf("k%d-%d", shard, i)), ExplicitHashKey: aws.String(hash)})
				}
				out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
				if err == nil && aws.ToInt32(out.FailedRecordCount) > 0 {
					err = fmt.Errorf("%d records refused", aws.ToInt32(out.FailedRecordCount))
				}
				return err
			})
		}
	}
	wg.Wait()
	return first
}
