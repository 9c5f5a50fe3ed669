package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The backlog part's table and verdicts (backlog.go).

// defaultBudget is the input's rule for an unset max_buffered_bytes: a
// quarter of the memory limit, at most 256 MiB (256 MiB with none).
func defaultBudget(limit int64) int64 {
	if limit <= 0 {
		return 256 << 20
	}
	return min(limit/4, 256<<20)
}

// backlogTarget is the most peak RSS a cell may reach: 1.3 x the budget +
// 100 MiB, and with a limit never above the limit + 5%. With no limit the
// figure is for information (the heap grows to twice what is live).
func backlogTarget(budget, limit int64) (target uint64, why string) {
	target, why = uint64(budget)*13/10+100<<20, "1.3 x budget + 100 MiB"
	if capped := uint64(limit) * 105 / 100; limit > 0 && capped < target {
		target, why = capped, "limit + 5%"
	}
	return target, why
}

func printBacklog(f backlogFlags, sides []backlogSide, counts []int, rows []backlogRow) error {
	budgetText := "unset (the default: a quarter of the memory limit, at most 256 MiB)"
	if f.budget != "" {
		budgetText = f.budget
	}
	fmt.Printf("backlog: raw records of %d B; KPL aggregates of %d user records of %d B; pipeline sleep %v per batch, a line per record to a file; kinesalite; median of %d run(s) of %v per cell; max_buffered_bytes %s\n",
		f.size, f.kplRecords, f.kplSize, f.sleep, f.runs, f.duration, budgetText)
	for i, s := range sides {
		fmt.Printf("\n%s: peak RSS MiB (records/s) by shard count\n", s.name)
		fmt.Printf("%-5s %-10s %8s", "kind", "GOMEMLIMIT", "budget")
		for _, n := range counts {
			fmt.Printf(" %16s", fmt.Sprintf("%d shards", n))
		}
		fmt.Printf(" %12s %-24s %7s %s\n", "target", "", "flat", "verdict")
		var failed []string
		for _, cell := range backlogCells(rows) {
			budget := cell[0].of(i, len(sides)).budget
			if budget == 0 {
				budget = defaultBudget(cell[0].limit)
				if f.budget != "" {
					budget, _ = parseBudget(f.budget)
				}
			}
			fmt.Printf("%-5s %-10s %8s", cell[0].kind, limitName(cell[0].limit), fmt.Sprintf("%dMiB", budget>>20))
			var peaks []uint64
			for _, r := range cell {
				m := r.of(i, len(sides))
				peaks = append(peaks, m.peakRSS)
				fmt.Printf(" %16s", fmt.Sprintf("%.0f (%.1f)", mib(m.peakRSS), m.rate))
			}
			flat := float64(slices.Max(peaks)) / float64(slices.Min(peaks))
			if cell[0].limit == 0 {
				fmt.Printf(" %12s %-24s %6.2fx for information: no limit\n", "-", "", flat)
				continue
			}
			target, why := backlogTarget(budget, cell[0].limit)
			ok := slices.Max(peaks) <= target && flat <= 1.3
			fmt.Printf(" %12s %-24s %6.2fx %s\n", fmt.Sprintf("<= %.0f", mib(target)), "("+why+")", flat, verdict(ok))
			if i == 0 && !ok {
				failed = append(failed, fmt.Sprintf("%s at GOMEMLIMIT %s: peak RSS up to %.0f MiB (target %.0f MiB), %.2fx from fewest to most shards (target 1.30x)",
					cell[0].kind, limitName(cell[0].limit), mib(slices.Max(peaks)), mib(target), flat))
			}
		}
		fmt.Println("targets: with a limit, peak RSS <= 1.3 x budget + 100 MiB and <= the limit + 5% at every shard count, and max / min across the shard counts <= 1.30x")
		if i == 0 && len(failed) > 0 {
			return errors.New(strings.Join(failed, "; "))
		}
	}
	return nil
}

// backlogCells groups rows by kind and limit, in the order measured: each
// group holds a row per shard count.
func backlogCells(rows []backlogRow) [][]backlogRow {
	type key struct {
		kind  string
		limit int64
	}
	var order []key
	groups := map[key][]backlogRow{}
	for _, r := range rows {
		k := key{r.kind, r.limit}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([][]backlogRow, 0, len(order))
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out
}
