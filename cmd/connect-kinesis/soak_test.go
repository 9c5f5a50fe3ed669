package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/chaos"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// ciSoakClasses are the soak's classes `make test` runs: every default
// class (so not wipe-holder, which lets instance faults overlap wipes) but
// streams. budget is on again since its budget is 2 MiB (at 512 KiB
// soak-big read one record a call and fell behind); kpl since its order
// violations were shown to be the checker's. streams passed at seeds 1, 2
// and 7949455874945913174 two at a time, but failed in a make test run
// beside three other soaks (load average up to 9): 10 records of a stream
// created again during the drain undelivered at the end, and a duplicate
// of a re-created stream by the same instance 29 s later outside every
// window (docs/data/soak-runs.md, open). Switch it on once that is explained.
func ciSoakClasses() []string {
	var out []string
	for _, c := range chaos.DefaultClasses() {
		if c != chaos.ClassStreams {
			out = append(out, c)
		}
	}
	return out
}

// commitSeed is the soak seed drawn from the commit: its first 16 hex
// digits.
func commitSeed(t *testing.T) uint64 {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil || len(strings.TrimSpace(string(out))) < 16 {
		t.Logf("no commit hash (%v): the commit seed is 2", err)
		return 2
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(out))[:16], 16, 64)
	if err != nil {
		t.Fatalf("parsing the commit hash: %v", err)
	}
	return v
}

// TestIntegrationSoak runs two 3-minute soaks (issue 34): the chaos suite's
// processes and checker under a schedule of overlapping faults drawn from a
// seed, one fixed (SOAK_SEED replaces it) and one drawn from the commit
// hash. Each prints its verdict line; the schedule and the report are in
// the test's log. Replay one with `make soak SEED=N DURATION=3m
// FAULTS=<the classes above>`.
func TestIntegrationSoak(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two 3-minute soaks; skipped with -short")
	}
	fixed := uint64(1)
	if s := os.Getenv("SOAK_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q is not an unsigned integer", s)
		}
		fixed = v
	}
	for _, run := range []struct {
		name string
		seed uint64
	}{{"fixed seed", fixed}, {"seed from the commit", commitSeed(t)}} {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			var started startedPIDs
			var report strings.Builder
			v, err := chaos.RunSoak(t.Context(), chaos.SoakConfig{
				Binary: binary, Dir: t.TempDir(), Seed: run.seed, Duration: 3 * time.Minute,
				Classes: ciSoakClasses(), Logf: t.Logf, Out: &report, Started: func(pid int) { started.add(pid) },
			})
			started.assertGone(t)
			testenv.Require(t, "running the soak", err)
			t.Logf("soak report:\n%s", report.String())
			fmt.Println(v.Line()) // both verdict lines in `make test`'s output
			assert.True(t, v.Pass(), "%s\nfirst invariant broken: %s", v.Line(), v.First)
		})
	}
}

// TestIntegrationSoakFailover runs a 2-minute soak of each failover class
// with kills: the soak's Redis is a master and a replica, and the replica
// is promoted under load (replication held, the master SIGKILLed). With
// min_replicas_to_ack 1 no acknowledged checkpoint may be lost; with 0 the
// commits the lag lost come again within their own window, counted on the
// verdict line. Each prints its verdict line. Not among TestIntegrationSoak's
// classes: the failover classes are not default (chaos.DefaultClasses).
func TestIntegrationSoakFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two 2-minute soaks; skipped with -short")
	}
	for _, class := range []string{chaos.ClassFailoverAcked, chaos.ClassFailoverUnacked} {
		t.Run(class, func(t *testing.T) {
			runPromotionSoak(t, class, "", class == chaos.ClassFailoverAcked)
		})
	}
}

// TestIntegrationSoakSentinelFailover runs a 2-minute soak of each
// failover-sentinel class with kills: the instances reach Redis through a
// real Sentinel (checkpoint.redis kind failover), and the Sentinel
// promotes the replica under load once the master is SIGKILLed with the
// replication it held. It asserts that the Sentinel switched the master
// (+switch-master in its log), that the instances followed it (their
// connections on each new master, which the report times), the
// min_replicas_to_ack in force, and the verdict, whose bounds are those
// of the failover classes.
func TestIntegrationSoakSentinelFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two 2-minute soaks; skipped with -short")
	}
	for _, class := range []string{chaos.ClassFailoverSentinelAcked, chaos.ClassFailoverSentinelUnacked} {
		t.Run(class, func(t *testing.T) {
			dir := runPromotionSoak(t, class, "the Sentinel", class == chaos.ClassFailoverSentinelAcked)
			sentinelLog, err := os.ReadFile(filepath.Join(dir, "redis-sentinel.log"))
			testenv.Require(t, "reading the Sentinel's log", err)
			assert.Contains(t, string(sentinelLog), "+switch-master", "the Sentinel did not switch the master")
		})
	}
}

// TestIntegrationSoakClusterFailover runs a 2-minute soak of each
// failover-cluster class with kills: the instances reach a Redis Cluster
// of three masters with one replica each (checkpoint.redis kind cluster),
// and the replica of the master holding the first stream's keys takes its
// slots over under load (CLUSTER FAILOVER TAKEOVER) once that master is
// SIGKILLed with the replication it held. It asserts that the promotion
// was the Cluster's (the takeover in the promoted node's log), that the
// instances ran their scripts on the promoted node, the
// min_replicas_to_ack in force, that no node or instance outlives the run,
// and the verdict, whose bounds are those of the failover classes.
func TestIntegrationSoakClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two 2-minute soaks; skipped with -short")
	}
	for _, class := range []string{chaos.ClassFailoverClusterAcked, chaos.ClassFailoverClusterUnacked} {
		t.Run(class, func(t *testing.T) {
			dir := runPromotionSoak(t, class, "a Cluster failover (CLUSTER FAILOVER TAKEOVER)", class == chaos.ClassFailoverClusterAcked)
			logs, err := filepath.Glob(filepath.Join(dir, "redis-cluster-*.log"))
			testenv.Require(t, "listing the cluster nodes' logs", err)
			assert.Len(t, logs, 6, "every node's log is kept")
			tookOver := false
			for _, f := range logs {
				b, err := os.ReadFile(f)
				testenv.Require(t, "reading a node's log", err)
				tookOver = tookOver || strings.Contains(string(b), "Taking over the master")
			}
			assert.True(t, tookOver, "no node's log shows the takeover")
		})
	}
}

// runPromotionSoak runs a 2-minute soak of class, a failover class whose
// promotion by names ("" for the soak's own, whose front proxy carries
// the clients over), with kills at seed 5, and asserts what such a run
// promises: no process it started outlives it, the report has the
// promotion (and the instances' scripts on the new master, which they
// found themselves), and the verdict passes. The verdict's bounds are the
// same with either min_replicas_to_ack (the promoted replica's
// checkpoints, with the lag's named or not), so the instances' own logs
// show which ran: with 1 (acked), commits waited for the replica and some
// were refused while the new master had none (each promotion until the
// old master is back); with 0, none. It prints the verdict line and
// returns the run's folder for the class's own checks.
func runPromotionSoak(t *testing.T, class, by string, acked bool) string {
	t.Helper()
	var started startedPIDs
	var report strings.Builder
	dir := t.TempDir()
	v, err := chaos.RunSoak(t.Context(), chaos.SoakConfig{
		Binary: binary, Dir: dir, Seed: 5, Duration: 2 * time.Minute,
		Classes: []string{class, chaos.ClassKill}, Logf: t.Logf, Out: &report, Started: func(pid int) { started.add(pid) },
	})
	started.assertGone(t)
	testenv.Require(t, "running the soak", err)
	t.Logf("soak report:\n%s", report.String())
	fmt.Println(v.Line())
	if by == "" {
		assert.Contains(t, report.String(), class+": promoted in", "no promotion ran")
	} else {
		assert.Contains(t, report.String(), class+": promoted by "+by+" in", "no promotion ran")
		assert.Contains(t, report.String(), class+": the instances reached the new master", "the instances did not follow the promotion")
		assert.NotContains(t, report.String(), "no instance reached the new master")
	}
	refused := notReplicatedCommits(t, dir)
	if acked {
		assert.Positive(t, refused, "min_replicas_to_ack 1: no commit was refused for want of the replica")
	} else {
		assert.Zero(t, refused, "min_replicas_to_ack 0: a commit waited for the replica")
	}
	assert.True(t, v.Pass(), "%s\nfirst invariant broken: %s", v.Line(), v.First)
	return dir
}

// notReplicatedCommits counts the lines of the instances' logs in dir
// that report a commit or a close the replicas did not acknowledge
// (checkpointer.ErrNotReplicated).
func notReplicatedCommits(t *testing.T, dir string) int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatalf("listing the soak's logs: %v", err)
	}
	n := 0
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		n += strings.Count(string(b), checkpointer.ErrNotReplicated.Error())
	}
	return n
}
