package main

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	parts["split"] = part{
		summary: "the ordered kinesis output with a splitting batching processor (split: {size: 100}) vs the same batching without it, on kinesalite (also run by the output part)",
		run:     runOutputSplit,
	}
}

// The batching of the split case's two sides: the same count and period,
// one with a processor that splits every batch in five parts (Benthos joins
// the parts again before the output writes them).
const (
	splitBaseBatching  = "{count: 500, period: 1s}"
	splitSplitBatching = "{count: 500, period: 1s, processors: [{split: {size: 100}}]}"
)

func runOutputSplit(ctx context.Context, args []string) error {
	var f outputFlags
	fs := flag.NewFlagSet("split", flag.ContinueOnError)
	fs.IntVar(&f.records, "n", 60000, "records to write on each side, over all rounds")
	fs.IntVar(&f.size, "size", 200, "bytes of data per record")
	fs.IntVar(&f.shards, "shards", 4, "shards of each stream")
	fs.IntVar(&f.concurrency, "concurrency", 64, "max_in_flight of the output")
	fs.IntVar(&f.rounds, "rounds", 3, "rotating rounds each side's records are split into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.rounds < 1 || f.records < f.rounds {
		return fmt.Errorf("-rounds %d: must be at least 1 and at most -n (%d)", f.rounds, f.records)
	}
	env, err := startEnv(ctx, envOptions{})
	if err != nil {
		return err
	}
	defer env.Close()
	return splitCase(ctx, env.emu.Endpoint, env.emu.CreateStream, f)
}

// splitCase writes f.records through the ordered output (the default
// preserve_order) with a splitting batching processor and without, in
// rotating rounds, and prints the ratio. Pacing per part once held each part
// after the first back for 10 s (2,000 messages in batches of 500 split in
// five: 161.7 s); pacing per formed batch keeps the split side within 1.5x
// of the other.
func splitCase(ctx context.Context, endpoint string, createStream func(context.Context, string, int) (string, error), f outputFlags) error {
	sides := []struct {
		mode     pluginMode
		batching string
		rounds   []measurement
	}{
		{mode: pluginMode{name: "ordered", fields: "preserve_order: true", stream: "bench-split-base"}, batching: splitBaseBatching},
		{mode: pluginMode{name: "ordered, split 100", fields: "preserve_order: true", stream: "bench-split-split"}, batching: splitSplitBatching},
	}
	setAWSEnv()
	for i := range sides {
		if _, err := createStream(ctx, sides[i].mode.stream, f.shards); err != nil {
			return err
		}
		g := f
		g.batching = sides[i].batching
		if err := pluginPut(ctx, endpoint, sides[i].mode, min(f.records, 5000), g); err != nil {
			return fmt.Errorf("warming up %s: %w", sides[i].mode.name, err)
		}
	}
	per := f.records / f.rounds
	for r := range f.rounds {
		for j := range sides {
			s := &sides[(r+j)%len(sides)]
			g := f
			g.batching = s.batching
			m, err := measure(per, func() error { return pluginPut(ctx, endpoint, s.mode, per, g) })
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, s.mode.name, err)
			}
			s.rounds = append(s.rounds, m)
		}
	}
	printComparison(
		fmt.Sprintf("Ordered output with a splitting batching processor: %d records x %d B, %d shards, kinesalite, batching %s against %s, medians of %d rotating rounds (target: within 1.5x, i.e. >= 0.67x records/s)",
			per*f.rounds, f.size, f.shards, splitSplitBatching, splitBaseBatching, f.rounds),
		sides[0].mode.name, sides[1].mode.name, median(sides[0].rounds), median(sides[1].rounds), 1/1.5, 0)
	return nil
}
