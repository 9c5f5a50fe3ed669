package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// KCL 3.x's documented lease pace, for the model column: every worker
// renews each lease it holds every failoverTimeMillis / 3 (10 s / 3 by
// default), one conditional write to the DynamoDB lease table each; a
// shard's lease is written once when shard sync creates it and once when
// the leader assigns it; a dead worker's lease is written once when it is
// assigned again.
const (
	kclFailover       = 10 * time.Second
	kclRenewalsPerMin = float64(time.Minute) / float64(kclFailover/3)
)

// kclIdleWrites is the model's DynamoDB writes per second for shards idle
// leases, whatever the number of workers.
func kclIdleWrites(shards int) float64 { return float64(shards) * kclRenewalsPerMin / 60 }

// scaleRow is one line of the table.
type scaleRow struct{ phase, figure, measured, target, kcl string }

func printScaleTable(f scaleFlags, kin scaleKinesis, t *scaleTable) {
	var rows []scaleRow
	add := func(phase, figure, measured, target, kcl string) {
		rows = append(rows, scaleRow{phase, figure, measured, target, kcl})
	}
	sec := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	lease, rebalance, handoff := checkpointer.DefaultLeasePeriod, checkpointer.DefaultRebalancePeriod, checkpointer.DefaultHandoffTimeout

	startRows := func(phase string, s *startFigures) {
		last := func(d time.Duration) string {
			if d < s.lastStart {
				return sec(s.lastStart-d) + " before the last start"
			}
			return sec(d-s.lastStart) + " after the last start"
		}
		add(phase, "every shard owned", fmt.Sprintf("first %s after the first start (%s); for good from %s (%d readings with a shard unowned in between)",
			sec(s.allOwned), last(s.allOwned), last(s.ownedForGood), s.ownedDrops),
			"≤ 30 s after the last start", "—")
		add(phase, "balanced (each within one of its share)", fmt.Sprintf("%s after the first start, %s; shards per process %s", sec(s.balanced), last(s.balanced), spanInts(s.counts)),
			"≤ 60 s after the last start", "—")
		add(phase, "lease takes per shard", fmt.Sprintf("%.2f (%d takes; %d script calls, %d commands on the masters until balanced)", float64(s.takes)/float64(s.total), s.takes, s.redisScripts, s.redisCmds),
			"—", fmt.Sprintf("2 writes per shard (created, assigned): %d writes", 2*s.total))
	}
	idleRows := func(phase string, shards int, idle *idleFigures) {
		perMin := time.Minute.Seconds() / idle.window.Seconds()
		var cpu, rss []float64
		for i := range idle.procCPU {
			cpu = append(cpu, idle.procCPU[i].Seconds()/idle.window.Seconds())
			rss = append(rss, mib(idle.procRSS[i]))
		}
		add(phase, "CPU per instance", fmt.Sprintf("%s cores (%s shards each)", spanFloats(cpu, 3), spanInts(idle.shards)),
			"≤ 0.05 cores at 500 shards", "—")
		add(phase, "RSS per instance", spanFloats(rss, 1)+" MiB", "≤ 150 MiB at 500 shards", "—")
		var ops []string
		for _, op := range slices.Sorted(maps.Keys(idle.calls)) {
			ops = append(ops, fmt.Sprintf("%s %.1f/s", op, float64(idle.calls[op])/idle.window.Seconds()))
		}
		get := float64(idle.calls["GetRecords"]) / idle.window.Seconds() / float64(shards)
		add(phase, "Kinesis calls", fmt.Sprintf("%.3f GetRecords per shard per s; %s", get, strings.Join(ops, ", ")), "—", "—")
		cmds := float64(idle.redis.masterTotal()) * perMin / float64(shards)
		rt := float64(idle.redis.masterScripts()) * perMin / float64(shards)
		add(phase, "Redis commands per shard per minute (masters, those run in scripts included, replicas' REPLCONF left out)", fmt.Sprintf("%.1f", cmds),
			"≤ 90", fmt.Sprintf("%.0f DynamoDB writes per shard per minute = %.0f writes/s for %d shards", kclRenewalsPerMin, kclIdleWrites(shards), shards))
		add(phase, "Redis round trips (script calls) per shard per minute", fmt.Sprintf("%.2f", rt), "—",
			fmt.Sprintf("%.0f (one UpdateItem per renewal)", kclRenewalsPerMin))
		var by []string
		mc := idle.redis.masterCmds()
		for _, name := range slices.Sorted(maps.Keys(mc)) {
			by = append(by, fmt.Sprintf("%s %.0f", name, float64(mc[name])*perMin))
		}
		add(phase, "Redis commands per minute by name (masters)", strings.Join(by, ", "), "—", "—")
		b := idle.redis.busiest()
		add(phase, "busiest Redis node", fmt.Sprintf("%s (%s): %.0f commands/s, redis-server %.3f cores", b.addr, b.role, float64(b.total)/idle.window.Seconds(), b.cpu.Seconds()/idle.window.Seconds()),
			"< 0.5 cores", "—")
		var nodes []string
		for _, n := range idle.redis {
			nodes = append(nodes, fmt.Sprintf("%s %s %.0f/s %.3f cores", n.addr, n.role, float64(n.total)/idle.window.Seconds(), n.cpu.Seconds()/idle.window.Seconds()))
		}
		add(phase, "every Redis node", strings.Join(nodes, "; "), "—", "—")
		if kin.PID() != 0 {
			add(phase, "Kinesis server CPU; the bench's (counting proxy)", fmt.Sprintf("%.3f cores; %.3f cores", idle.kinCPU.Seconds()/idle.window.Seconds(), idle.benchCPU.Seconds()/idle.window.Seconds()), "—", "—")
		} else {
			add(phase, "the bench's CPU (the simulator runs in it)", fmt.Sprintf("%.3f cores", idle.benchCPU.Seconds()/idle.window.Seconds()), "—", "—")
		}
	}

	one := fmt.Sprintf("Start: 1 stream × %d shards", f.shards)
	if t.one != nil {
		startRows(one, t.one)
		add(one, "the stream's slot", "on master "+t.oneStreamMaster, "—", "—")
	}
	many := fmt.Sprintf("Start: %d streams × %d shards, found by a pattern", f.streams, f.streamShards)
	if t.many != nil {
		startRows(many, t.many)
		var spread []string
		for _, m := range slices.Sorted(maps.Keys(t.streamsPerNode)) {
			spread = append(spread, fmt.Sprintf("%s %d", m, t.streamsPerNode[m]))
		}
		add(many, "streams per master (by their slots)", strings.Join(spread, ", "), "—", "—")
	}
	if t.oneIdle != nil {
		idleRows(fmt.Sprintf("Idle %v: 1 stream × %d shards", t.oneIdle.window.Round(time.Second), f.shards), f.shards, t.oneIdle)
	}
	if t.manyIdle != nil {
		idleRows(fmt.Sprintf("Idle %v: %d streams × %d shards", t.manyIdle.window.Round(time.Second), f.streams, f.streamShards), f.streams*f.streamShards, t.manyIdle)
	}
	if fo := t.failover; fo != nil {
		phase := fmt.Sprintf("Failover: SIGKILL %d of %d", fo.killed, fo.procs)
		add(phase, "their shards owned again", fmt.Sprintf("%s after the kill (%d shards)", sec(fo.reowned), fo.orphaned),
			fmt.Sprintf("≤ lease.period + rebalance_period + 5 s = %s", sec(lease+rebalance+5*time.Second)),
			fmt.Sprintf("%d writes (one assignment each), after the %v failover time", fo.orphaned, kclFailover))
		add(phase, "shards of live instances moved", fmt.Sprintf("%d (until the survivors were balanced, %s)", fo.moved, orNot(fo.rebalanced, sec)), "0", "—")
		add(phase, "the killed restarted, group balanced again", orNot(fo.rejoined, sec), "—", "—")
	}
	if r := t.rolling; r != nil {
		phase := fmt.Sprintf("Rolling restart: SIGTERM each of %d, keyed load on %d shards", f.procs, r.loadedShards)
		add(phase, "lost", fmt.Sprintf("%d of %d written", r.lost, r.written), "0", "—")
		add(phase, "duplicates", fmt.Sprintf("%d (%d read that no accepted write explains)", r.duplicates, r.unexpected), "0", "—")
		add(phase, "longest time a shard had no owner", fmt.Sprintf("%s (%s; sampled every 250 ms)", sec(r.longestUnowned), r.longestShard),
			fmt.Sprintf("≤ handoff_timeout + rebalance_period = %s", sec(handoff+rebalance)), "—")
		add(phase, "per-key order (within each process's output)", fmt.Sprintf("%d keys' records read out of order", r.orderBroken), "0", "—")
		add(phase, "restarts", fmt.Sprintf("%d; back (owning shards, every shard owned) after at most %s from the SIGTERM, %d never within -step-timeout %v; %d settled with no lease moved for %v but not balanced by count, %d not settled within -step-timeout; %d stops past it",
			r.steps, sec(r.longestBack), r.neverBack, f.stepTimeout, r.stepsQuiet, f.stepQuiet, r.stepsLate, r.stopsForced), "—", "—")
	}

	settings := "input defaults but idle_poll_interval " + f.idlePoll
	if f.balance != "" {
		settings += ", lease.balance " + f.balance
	}
	redisDesc := "a Redis Cluster of 3 masters and 3 replicas on loopback"
	if f.redisKind == "single" {
		redisDesc = "one redis-server"
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("scale: %d processes of connect-kinesis (%s) started over %v; %s; Kinesis: %s. %s UTC, load average %s\n",
		f.procs, settings, f.spread, redisDesc, f.kinesisBE, time.Now().UTC().Format("2006-01-02 15:04"), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("The KCL 3.x column is a model from KCL's documented lease pace (each lease renewed every failoverTimeMillis / 3 = %v / 3), not a run.\n\n", kclFailover)
	fmt.Println("| phase | figure | measured | target | KCL 3.x lease table (model) |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.phase, r.figure, r.measured, r.target, r.kcl)
	}
}

func orNot(d time.Duration, f func(time.Duration) string) string {
	if d == 0 {
		return "not within -timeout"
	}
	return f(d)
}

func spanInts(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

func spanFloats(v []float64, prec int) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f–%.*f", prec, slices.Min(v), prec, slices.Max(v))
}
