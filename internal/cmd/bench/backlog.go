package main

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"math"
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

	"github.com/connect-kinesis/connect-kinesis/internal/kpl"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

func init() {
	parts["backlog"] = part{
		summary: "peak RSS of the connect-kinesis process on a backlog behind a slow pipeline, by shard count, record kind and GOMEMLIMIT, on kinesalite",
		run:     runBacklog,
	}
}

type backlogFlags struct {
	shards, kinds, limits, budget string
	size, kplRecords, kplSize     int
	fill                          float64
	runs                          int
	duration, sleep               time.Duration
	base, logLevel, profileDir    string
}

func runBacklog(ctx context.Context, args []string) error {
	var f backlogFlags
	fs := flag.NewFlagSet("backlog", flag.ContinueOnError)
	fs.StringVar(&f.shards, "shards", "8,64,256", "shard counts, comma-separated")
	fs.StringVar(&f.kinds, "kinds", "raw,kpl", "record kinds: raw (one record of -size bytes) and kpl (KPL aggregates of -kpl-records user records of -kpl-size bytes)")
	fs.StringVar(&f.limits, "limits", "none,1GiB,512MiB,300MiB", "GOMEMLIMIT of the process, comma-separated; none runs it with no memory limit")
	fs.StringVar(&f.budget, "budget", "", "max_buffered_bytes of the input; empty leaves it unset (the default, which follows the memory limit)")
	fs.IntVar(&f.size, "size", 900_000, "bytes of data per raw record")
	fs.IntVar(&f.kplRecords, "kpl-records", 200, "user records per KPL aggregate")
	fs.IntVar(&f.kplSize, "kpl-size", 250, "bytes of data per KPL user record")
	fs.Float64Var(&f.fill, "fill", 1.5, "the backlog of each stream, as a multiple of the largest default budget (256 MiB) in what the budget charges for it")
	fs.IntVar(&f.runs, "runs", 1, "runs per cell; figures are medians")
	fs.DurationVar(&f.duration, "duration", 25*time.Second, "how long each run reads the backlog")
	fs.DurationVar(&f.sleep, "sleep", time.Second, "the pipeline's sleep per batch: slower than Kinesis")
	fs.StringVar(&f.logLevel, "log-level", "info", "the process' log level (its log is shown when it passes no record)")
	fs.StringVar(&f.base, "base", "", "a commit to measure too, with its defaults, built from git archive")
	fs.StringVar(&f.profileDir, "profile-dir", "", "a directory for each run's heap profile at its peak RSS (from the process' pprof endpoint) and its log")
	if err := fs.Parse(args); err != nil {
		return err
	}
	counts, err := positiveList(f.shards)
	if err != nil {
		return fmt.Errorf("-shards %q: a list of positive counts", f.shards)
	}
	kinds := strings.Split(f.kinds, ",")
	for _, k := range kinds {
		if k != "raw" && k != "kpl" {
			return fmt.Errorf("-kinds %q: raw, kpl or both", f.kinds)
		}
	}
	var limits []int64
	for _, l := range strings.Split(f.limits, ",") {
		n := int64(0)
		if l = strings.TrimSpace(l); l != "none" {
			if n, err = parseBudget(l); err != nil || n <= 0 {
				return fmt.Errorf("-limits %q: sizes such as 300MiB, or none", f.limits)
			}
		}
		limits = append(limits, n)
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
	fields := ""
	if f.budget != "" {
		fields = "    max_buffered_bytes: " + f.budget + "\n"
	}
	sides := []backlogSide{{name: "this", bin: bin, fields: fields}}
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
	for _, kind := range kinds {
		for _, n := range counts {
			stream := fmt.Sprintf("backlog-%s-%d", kind, n)
			perShard, bytes := backlogShape(f, kind, n)
			fmt.Fprintf(os.Stderr, "bench backlog: %s, %d shards, writing %d records per shard (%.0f MiB)...\n", kind, n, perShard, mib(uint64(bytes)))
			started := time.Now()
			if err := fillBacklog(ctx, env.emu, stream, n, perShard, backlogRecord(f, kind)); err != nil {
				return fmt.Errorf("filling %s: %w", stream, err)
			}
			fmt.Fprintf(os.Stderr, "bench backlog: written in %v\n", time.Since(started).Round(time.Second))
			for _, limit := range limits {
				row := backlogRow{kind: kind, shards: n, limit: limit, backlog: bytes}
				for r := range f.runs {
					for i, s := range sides {
						// Each run is a new group, so it reads the backlog from the start.
						group := fmt.Sprintf("g-%s-%d-%d-%d-%d", kind, n, limit>>20, r, i)
						m, err := backlogRun(ctx, dir, s, stream, group, env.emu.Endpoint, env.red.URL(), limit, f)
						// A run that passed no record still shows what reading
						// the backlog held; its log was shown.
						if err != nil {
							return fmt.Errorf("%s, %d shards, GOMEMLIMIT %s, run %d, %s: %w", kind, n, limitName(limit), r+1, s.name, err)
						}
						live := ""
						if m.liveMB > 0 {
							live = fmt.Sprintf(", largest live heap %d MB", m.liveMB)
						}
						fmt.Fprintf(os.Stderr, "bench backlog: %s, %d shards, GOMEMLIMIT %s, run %d, %s: peak RSS %.0f MiB, %.1f records/s%s\n", kind, n, limitName(limit), r+1, s.name, mib(m.peakRSS), m.rate, live)
						row.runs = append(row.runs, m)
					}
				}
				rows = append(rows, row)
			}
			_, _ = env.emu.Client().DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(stream)})
		}
	}
	return printBacklog(f, sides, counts, rows)
}

func positiveList(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", p)
		}
		out = append(out, n)
	}
	return out, nil
}

func limitName(limit int64) string {
	if limit == 0 {
		return "none"
	}
	return fmt.Sprintf("%dMiB", limit>>20)
}

// recordCharge is what the input's budget charges for one user record
// beyond its data and key: its sequence number and a fixed 768 bytes.
const recordCharge = 56 + 768

// backlogShape is the records per shard of a stream of kind with n shards,
// and the bytes of data written: enough that the budget's charge for the
// backlog is f.fill times the largest default budget, at least 2 records
// per shard.
func backlogShape(f backlogFlags, kind string, n int) (perShard int, data int64) {
	charge, size := f.size+10+recordCharge, f.size
	if kind == "kpl" {
		charge, size = f.kplRecords*(f.kplSize+10+recordCharge), f.kplRecords*(f.kplSize+16)
	}
	perShard = max(2, int(math.Ceil(f.fill*(256<<20)/float64(n*charge))))
	return perShard, int64(perShard * n * size)
}

// backlogRecord makes record i of a shard whose hash key is hash.
func backlogRecord(f backlogFlags, kind string) func(shard, i int, hash string) types.PutRecordsRequestEntry {
	if kind == "raw" {
		data := bytes.Repeat([]byte("x"), f.size)
		return func(shard, i int, hash string) types.PutRecordsRequestEntry {
			return types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprintf("k%d-%d", shard, i)), ExplicitHashKey: aws.String(hash)}
		}
	}
	data := bytes.Repeat([]byte("y"), f.kplSize)
	return func(shard, i int, hash string) types.PutRecordsRequestEntry {
		subs := make([]kpl.Record, f.kplRecords)
		for j := range subs {
			// The shard's hash key on every user record: the input drops a
			// user record whose hash lies outside its shard.
			subs[j] = kpl.Record{PartitionKey: fmt.Sprintf("k%d-%d-%d", shard, i, j), ExplicitHashKey: hash, Data: data}
		}
		return types.PutRecordsRequestEntry{Data: kpl.Encode(subs), PartitionKey: aws.String(fmt.Sprintf("k%d-%d", shard, i)), ExplicitHashKey: aws.String(hash)}
	}
}

// backlogSide is one binary measured, with its input fields.
type backlogSide struct {
	name, bin, fields string
}

type backlogRun1 struct {
	peakRSS uint64
	rate    float64
	budget  int64 // the budget the process logged; 0 if it logged none
	// liveMB is the largest live heap after a collection, in MB, with
	// GODEBUG=gctrace=1 in the bench's environment; 0 without.
	liveMB int
}

// backlogRow is one cell: a kind, a shard count and a memory limit.
type backlogRow struct {
	kind    string
	shards  int
	limit   int64
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
	return backlogRun1{peakRSS: rss[len(rss)/2], rate: rate[len(rate)/2], budget: r.runs[i].budget}
}

// parseBudget reads a size such as 256MiB as the input would.
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

// fillBacklog creates stream with n shards and writes records of them
// to each shard, by explicit hash key, in requests of at most 4 MiB.
func fillBacklog(ctx context.Context, emu *testenv.Kinesis, stream string, n, records int, record func(shard, i int, hash string) types.PutRecordsRequestEntry) error {
	if _, err := emu.CreateStream(ctx, stream, n); err != nil {
		return err
	}
	c := emu.Client()
	step := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(int64(n)))
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
		mu    sync.Mutex
		first error
	)
	put := func(entries []types.PutRecordsRequestEntry) {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			out, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
			if err == nil && aws.ToInt32(out.FailedRecordCount) > 0 {
				err = fmt.Errorf("%d records refused", aws.ToInt32(out.FailedRecordCount))
			}
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}()
	}
	for shard := range n {
		hash := new(big.Int).Add(new(big.Int).Mul(step, big.NewInt(int64(shard))), big.NewInt(1)).String()
		var entries []types.PutRecordsRequestEntry
		size := 0
		for i := range records {
			e := record(shard, i, hash)
			if len(entries) > 0 && (size+len(e.Data) > 4<<20 || len(entries) == 500) {
				put(entries)
				entries, size = nil, 0
			}
			entries, size = append(entries, e), size+len(e.Data)
		}
		if len(entries) > 0 {
			put(entries)
		}
	}
	wg.Wait()
	return first
}
