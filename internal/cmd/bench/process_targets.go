package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// printProcessTargets prints the process case's ratios (process.go)
// against their targets, and for information the ratios that have none.
func printProcessTargets(ctx context.Context, bin, self string, emu *testenv.Kinesis, f processFlags, size, concurrency int, sides []processSide, results [][]processResult, med []processResult) {
	per := func(r processResult) float64 { return float64(r.cpu.Microseconds()) / float64(f.records) }
	ordered, unordered, drop, raw, batched := med[0], med[1], med[2], med[3], med[4]
	// The CPU ratio between two sides is also taken round by round, of
	// the two processes run in the same round: the machine's speed drifts
	// between rounds (a fifth on this shared machine), and both sides of
	// a round see the same drift. The verdict is on the median of those.
	paired := func(a, b int) (float64, string) {
		var rs []float64
		var ss []string
		for r := range f.rounds {
			v := per(results[a][r]) / per(results[b][r])
			rs = append(rs, v)
			ss = append(ss, fmt.Sprintf("%.2fx", v))
		}
		slices.Sort(rs)
		return rs[len(rs)/2], strings.Join(ss, ", ")
	}
	limit := min(120<<20, 2*drop.rss)
	fmt.Printf("%-40s %6.0f MiB  target <= %.0f MiB (120 MiB and 2x generate -> drop)  %s\n", "peak RSS, ordered (default)", mib(ordered.rss), mib(limit), verdict(ordered.rss <= limit))
	// Order's targets where a request can still be full: at 1,024 keys,
	// and at 64 keys with aggregation (a key's records are one aggregate).
	o1k, o1kRounds := paired(6, 7)
	fmt.Printf("%-40s %6.2fx      target <= 1.15x  %s  (by round: %s)\n", "CPU/record ordered / unordered, 1024 keys", o1k, verdict(o1k <= 1.15), o1kRounds)
	oa, oaRounds := paired(5, 1)
	fmt.Printf("%-40s %6.2fx      target <= 1.15x  %s  (by round: %s)\n", "  ordered + aggregation / unordered, 64", oa, verdict(oa <= 1.15), oaRounds)
	// At 64 keys without aggregation a request holds each key once, so
	// ordered sends about eight times the requests: no scheduling can send
	// fewer, and the ratio is what order costs there, not a target.
	ou, ouRounds := paired(0, 1)
	fmt.Printf("%-40s %6.2fx      for information: the price of order, each key once per request  (by round: %s; of the medians: %.2fx)\n", "  ordered / unordered, 64 keys", ou, ouRounds, per(ordered)/per(unordered))
	// A whole Benthos process against a loop that makes no messages: the
	// target is on the output's own code, below.
	ur, urRounds := paired(1, 3)
	fmt.Printf("%-40s %6.2fx      for information: a whole process against a loop that makes no messages  (by round: %s)\n", "CPU/record unordered / raw SDK", ur, urRounds)
	fmt.Printf("%-40s %6.2fx      (the output alone: less generate -> drop)\n", "  net of the generator", (per(unordered)-per(drop))/per(raw))
	fmt.Printf("%-40s %6.2fx      (the output alone: less generate -> batching -> drop)\n", "  net of generator and batching", (per(unordered)-per(batched))/per(raw))
	// The output's own code, the way a profile sees it: one more
	// unordered process, profiled over its run, charged with the share of
	// its samples under the output's WriteBatch (the producer and the SDK
	// within) and in the HTTP client's connection goroutines.
	own, err := ownShare(ctx, bin, self, sides[1], emu, f, size, concurrency, unordered.wall)
	if err != nil {
		fmt.Printf("%-40s not measured (no profile: %v)  target <= 0.90x\n", "the output's own code / raw SDK", err)
	} else {
		r := own * per(unordered) / per(raw)
		fmt.Printf("%-40s %6.2fx      target <= 0.90x  %s  (%.1f µs/record: %.0f%% of a profiled unordered process' CPU is under WriteBatch or the HTTP client's connections)\n",
			"the output's own code / raw SDK", r, verdict(r <= 0.9), own*per(unordered), 100*own)
	}
	fmt.Println()
}
