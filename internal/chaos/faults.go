package chaos

import (
	"fmt"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
)

// Faults are what the proxy does throughout the load: 10% throttling, 1%
// 5xx and some connection resets on every call, refused PutRecords entries,
// expired iterators, answers cut mid-body, and the per-shard limits.
func Faults(f *faultproxy.Front) {
	f.Set(faultproxy.AllOperations, faultproxy.Rule{ThrottleRate: 0.10, ErrorRate: 0.01, CutRate: 0.005})
	f.Set("PutRecords", faultproxy.Rule{ThrottleRate: 0.10, ErrorRate: 0.01, CutRate: 0.005, CutAfterRate: 0.005, EntryFailRate: 0.05})
	f.SetReadFaults(faultproxy.ReadFaults{ExpiredIteratorRate: 0.01, ResetRate: 0.01})
	f.SetLimits(faultproxy.Limits{Reads: true, Writes: true})
}

// injected sums up what the proxy did, so the table shows the faults fired.
func (r *runner) injected() string {
	var throttled, failed, cut, cutAfter, refused int
	for _, op := range []string{"PutRecords", "GetRecords", "GetShardIterator", "ListShards", "DescribeStreamSummary", "DescribeStream"} {
		st := r.front.Stats(op)
		throttled += st.Throttled
		failed += st.Errors
		cut += st.Cut
		cutAfter += st.CutAfter
		refused += st.EntriesRefused
	}
	fs := r.front.FrontStats()
	// Calls the shard limits throttled never reach the Proxy's counts.
	reads := r.front.Stats("GetRecords").Requests + fs.ReadsThrottled
	s := fmt.Sprintf("%d throttled, %d 5xx, %d cut, %d cut after write, %d entries refused, %d expired iterators, %d answers cut mid-body, %d of %d GetRecords and %d records over shard limits",
		throttled, failed, cut, cutAfter, refused, fs.ExpiredIterators, fs.ResetsMidAnswer, fs.ReadsThrottled, reads, fs.RecordsThrottled)
	if r.cutter != nil {
		s += fmt.Sprintf("; enhanced fan-out: %d connections cut under live subscriptions", r.cuts.Load())
	}
	return s
}
