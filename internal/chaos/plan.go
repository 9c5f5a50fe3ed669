package chaos

import (
	"time"
)

// Plan is the shape of a run: load, timings and when each event happens
// (offsets from the start of the load).
type Plan struct {
	Shards        int
	Keys          int
	BatchInterval time.Duration // the load: one record per key per interval
	Load          time.Duration
	Drain         time.Duration // the most time the consumers get to catch up afterwards

	LeasePeriod, Rebalance, CommitPeriod time.Duration

	KillEvery, RestartAfter time.Duration
	Splits                  []time.Duration
	Merge                   time.Duration
	RedisRestart            time.Duration
	RedisPause              time.Duration
	PauseFor                time.Duration
}

// PlanFor returns the short or the full plan.
func PlanFor(short bool) Plan {
	p := Plan{
		LeasePeriod:  3 * time.Second,
		Rebalance:    time.Second,
		CommitPeriod: 500 * time.Millisecond,
		RestartAfter: time.Second,
	}
	if short {
		p.Shards, p.Keys, p.BatchInterval, p.Load, p.Drain = 3, 15, 100*time.Millisecond, 32*time.Second, 90*time.Second
		p.KillEvery = 6 * time.Second
		p.Splits = []time.Duration{7 * time.Second, 13 * time.Second}
		p.Merge = 22 * time.Second
		p.RedisRestart = 17 * time.Second
		p.RedisPause = 26 * time.Second
	} else {
		p.Shards, p.Keys, p.BatchInterval, p.Load, p.Drain = 4, 20, 100*time.Millisecond, 90*time.Second, 180*time.Second
		p.KillEvery = 5 * time.Second
		p.Splits = []time.Duration{15 * time.Second, 30 * time.Second}
		p.Merge = 50 * time.Second
		p.RedisRestart = 40 * time.Second
		p.RedisPause = 70 * time.Second
	}
	p.PauseFor = p.LeasePeriod + 2*time.Second
	return p
}

// killWindow is how far before a SIGKILL a first delivery may be and still
// be delivered again: twice the commit period plus a lease period of slack.
func killWindow(p Plan) time.Duration { return 2*p.CommitPeriod + p.LeasePeriod }

// producerDeadline is how long the producer may take: the faults and a busy
// machine (kinesis-mock slows down as shards fill) stretch the nominal load.
func producerDeadline(p Plan) time.Duration { return 4*p.Load + p.Drain }

// maxOpenShards is the most shards the stream has open at once: each split
// opens one more, the merge closes one after them.
func maxOpenShards(p Plan) int { return p.Shards + len(p.Splits) }
