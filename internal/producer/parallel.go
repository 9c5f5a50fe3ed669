package producer

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A write of one batch sized by the shard count (tens of thousands of
// records) spends tens of milliseconds hashing keys, aggregating and sorting
// records into rounds before its first request goes out, and an output that
// writes one batch at a time cannot hide that behind another batch's round
// trip. That work is per record or per shard, so it spreads over the cores;
// a small write (the usual batch of 500) stays on its goroutine, where
// starting goroutines would cost more than it saves.

// parallelMin is the number of records below which a step of a write runs
// on the write's own goroutine.
const parallelMin = 4096

// workers is how many goroutines a step over n items of a write uses.
func workers(n int) int {
	if n < parallelMin {
		return 1
	}
	return max(1, min(runtime.GOMAXPROCS(0), n/(parallelMin/2)))
}

// inChunks calls fn over [0, n) split into one contiguous chunk per worker,
// concurrently, and returns when all have returned.
func inChunks(n int, fn func(from, to int)) {
	w := workers(n)
	if w == 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for c := range w {
		from, to := n*c/w, n*(c+1)/w
		if c == w-1 {
			fn(from, to)
			break
		}
		wg.Go(func() { fn(from, to) })
	}
	wg.Wait()
}

// eachOf calls fn(worker, i) for every i in [0, items), taking items in
// turn on as many workers as a write of size records warrants, and returns
// when all are done. worker numbers the goroutine, from 0, so fn can keep
// scratch state per worker.
func eachOf(items, size int, fn func(worker, i int)) {
	w := min(workers(size), items)
	if w <= 1 {
		for i := range items {
			fn(0, i)
		}
		return
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	run := func(worker int) {
		for i := int(next.Add(1) - 1); i < items; i = int(next.Add(1) - 1) {
			fn(worker, i)
		}
	}
	for worker := 1; worker < w; worker++ {
		wg.Go(func() { run(worker) })
	}
	run(0)
	wg.Wait()
}
