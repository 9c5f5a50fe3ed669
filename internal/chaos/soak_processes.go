package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// soakInstanceYAML is a consumer instance of the soak: it reads every
// stream of the load; each record becomes a line with its key, counter,
// stream and shard, sequence (and sub-sequence for a KPL user record),
// redelivery mark and delivery attempt, incarnation and time
// (soakMapping). %s after the pipeline's mapping is the output class's slow
// step; then the output (instanceOutput): a poison record is rejected and,
// after five attempts, goes to the dead letter; the others go to the file
// or a switch that nacks some. Five, not three: a good record nacked by
// that switch three times in a row (2% each, once isolated) would be
// dead-lettered about once in 2,500 nacks.
// soakMaxAttempts is the instances' redelivery.max_attempts, written on
// their poison hand-over lines too (heldBehindPoison).
const soakMaxAttempts = "5"

const soakInstanceYAML = `
http: { enabled: false }
logger: { level: info, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
%s    start_position: trim_horizon
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: '%s'%s }
      group: %s
      commit_period: %s
    lease: { period: %s, rebalance_period: %s, handoff_timeout: 5s }
    shard_max_in_flight: 1
    shard_discovery_interval: 1s
    idle_poll_interval: 300ms
    max_buffered_bytes: %d
    lag_warn_threshold: %s
    redelivery: { max_attempts: ` + soakMaxAttempts + `, dead_letter: ` + deadLetterLabel + ` }
pipeline:
  processors:
    - mapping: |
%s
%s%sshutdown_timeout: 15s
`

// soakMapping makes a record the delivery line of incarnation inc. A
// record of the streams class carries its stream's incarnation label
// (stream), which stands for the stream's name in the line's shard.
func soakMapping(inc string) string {
	return `let sub = @kinesis_sub_sequence_number.or("").string()
root.k = this.k
root.c = this.c
root.poison = this.poison.or(false)
root.shard = this.stream.or(@kinesis_stream) + "/" + @kinesis_shard
root.seq = @kinesis_sequence_number + if $sub == "" { "" } else { "/" + $sub }
root.redelivered = @kinesis_redelivered.or("").string()
root.attempt = @kinesis_delivery_attempt.or("").string()
root.inst = "` + inc + `"
root.at = now()
root.batch = if this.poison.or(false) { batch_size() } else { deleted() }`
}

// outputBehaviour draws, for the output class, whether an incarnation's
// output is slow, nacks some batches (their first message, so a batch's
// chance does not grow with its size: a nacked batch is delivered again
// whole), or neither.
func (s *soak) outputBehaviour(out string) (slow, output, what string, pace time.Duration) {
	file := fmt.Sprintf("file: { path: %s, codec: lines }", out)
	if !s.on[ClassOutput] {
		return "", file, "", 0
	}
	s.smu.Lock()
	n := s.outRNG.IntN(3)
	ms := 2 + s.outRNG.IntN(9)
	s.smu.Unlock()
	switch n {
	case 0:
		return fmt.Sprintf("    - sleep: { duration: %dms }\n", ms), file, fmt.Sprintf(", output slow (%d ms a message)", ms), time.Duration(ms) * time.Millisecond
	case 1:
		return "", fmt.Sprintf(`switch:
  cases:
    - check: 'batch_index() == 0 && random_int(min: 0, max: 99) < 2'
      output: { reject: "soak nack" }
    - output:
        file: { path: %s, codec: lines }`, out), ", output nacks 2% of batches", 0
	}
	return "", file, "", 0
}

// readsFanOut draws whether the next incarnation reads with enhanced
// fan-out: half of them do with the efo class, none without it.
func (s *soak) readsFanOut() bool {
	if !s.on[ClassEFO] {
		return false
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.efoRNG.IntN(2) == 0
}

// fanOutReaders names the live incarnations that read with enhanced
// fan-out.
func (s *soak) fanOutReaders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var live []string
	for _, in := range s.instances {
		select {
		case <-in.done:
		default:
			if s.fanOut[in.name] {
				live = append(live, in.name)
			}
		}
	}
	sort.Strings(live)
	return live
}

// budget is the instances' max_buffered_bytes.
func (s *soak) budget() int {
	if s.on[ClassBudget] {
		return smallBudgetBytes
	}
	return budgetBytes
}

// startInstance launches a new incarnation of instance name.
func (s *soak) startInstance(name string) error {
	s.smu.Lock()
	s.incN[name]++
	inc := name + strconv.Itoa(s.incN[name])
	s.smu.Unlock()
	out := filepath.Join(s.cfg.Dir, inc+".jsonl")
	s.mu.Lock()
	s.outputs = append(s.outputs, out)
	s.mu.Unlock()

	names, discovery := s.instanceStreams()
	p := s.plan
	slow, output, what, pace := s.outputBehaviour(out)
	endpoint, fanOut := s.front.URL, s.readsFanOut()
	if fanOut {
		endpoint = "https://" + s.cutter.Addr
		discovery += "    enhanced_fan_out: { enabled: true }\n"
		what += ", enhanced fan-out"
	}
	conf := filepath.Join(s.cfg.Dir, inc+".yaml")
	redisURL, err := s.redisURLFor(name)
	if err != nil {
		return err
	}
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(soakInstanceYAML, names, discovery, testenv.Region, endpoint,
		testenv.AccessKey, testenv.SecretKey, redisURL, s.redisReplicasField(), group, p.CommitPeriod, p.LeasePeriod, p.Rebalance,
		s.budget(), budgetWaitBound, indent(soakMapping(inc), 8), slow, instanceOutput(soakMapping(inc), output, deadLetterPath(out), handoverPath(out), soakMaxAttempts))), 0o600); err != nil {
		return err
	}
	c, err := s.launch(conf, filepath.Join(s.cfg.Dir, inc+".log"))
	if err != nil {
		return err
	}
	in := &incarnation{name: inc, child: c}
	s.mu.Lock()
	s.instances[name] = in
	s.incPids[inc] = c.cmd.Process.Pid
	s.plain[inc] = what == ""
	s.slowPace[inc] = pace
	s.fanOut[inc] = fanOut
	if strings.Contains(what, "nacks") {
		// A nacked batch is delivered again whole, and what the output
		// wrote of it before the nack is written twice: its messages
		// reach the file again, and a key's later message may reach it
		// before the nacked one.
		s.windows = append(s.windows, Window{What: "nacks of " + inc, Kind: "nacks", Inst: inc, Resent: true, From: time.Now(), To: time.Now().Add(100 * 365 * 24 * time.Hour)})
		s.nackers[inc] = true
	}
	s.mu.Unlock()
	s.note("start %s (pid %d%s)", inc, c.cmd.Process.Pid, what)
	return nil
}

// redisURLFor is the Redis URL of instance name: with the redis-cut
// class, through that instance's own TCP proxy, so one instance can be cut
// off while the others reach Redis.
func (s *soak) redisURLFor(name string) (string, error) {
	u := s.redisInputURL
	if !s.on[ClassRedisCut] {
		return u, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.redisCuts[name]
	if p == nil {
		var err error
		if p, err = testenv.StartTCPProxy(s.redisTarget); err != nil {
			return "", err
		}
		s.redisCuts[name] = p
	}
	return strings.Replace(u, s.redisTarget, p.Addr, 1), nil
}

// redisReplicasField is the instances' min_replicas_to_ack with the
// failover classes (and the Sentinel's kind and master name with the
// sentinel ones), else nothing (the default).
func (s *soak) redisReplicasField() string {
	if !s.failoverOn {
		return ""
	}
	switch s.promoter {
	case promoterSentinel:
		return fmt.Sprintf(", kind: failover, master: %s, min_replicas_to_ack: %d", testenv.SentinelMaster, s.minReplicas)
	case promoterCluster:
		return fmt.Sprintf(", kind: cluster, min_replicas_to_ack: %d", s.minReplicas)
	}
	return fmt.Sprintf(", min_replicas_to_ack: %d", s.minReplicas)
}

// redisCut is instance name's proxy to Redis, nil without the class.
func (s *soak) redisCut(name string) *testenv.TCPProxy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redisCuts[name]
}

// closeRedisCuts closes the instances' proxies to Redis.
func (s *soak) closeRedisCuts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.redisCuts {
		p.Close()
	}
}

// live returns the running incarnation of name, or nil.
func (s *soak) live(name string) *incarnation {
	s.mu.Lock()
	in := s.instances[name]
	s.mu.Unlock()
	if in == nil {
		return nil
	}
	select {
	case <-in.done:
		return nil
	default:
		return in
	}
}

// stopInstance sends sig to name's incarnation and waits for it to end
// (SIGTERM: at most 30 s, then SIGKILL). It returns the incarnation, nil if
// none ran.
func (s *soak) stopInstance(name string, sig syscall.Signal) *incarnation {
	in := s.live(name)
	if in == nil {
		return nil
	}
	s.smu.Lock()
	s.stopped[in.name] = true
	s.smu.Unlock()
	_ = in.cmd.Process.Signal(sig)
	select {
	case <-in.done:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.done
	}
	return in
}

// baseNames are the instances that run all along; extraNames those the
// scale class adds for a while. No name is a prefix of another.
func (s *soak) baseNames() []string {
	names := make([]string, s.sc.Instances)
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	return names
}

var extraNames = []string{"x", "y"}

// soakProducerYAML writes one record per key per interval, keys
// <prefix>0..N, each with its key's counter (a few poison: poison.go), to one stream, until it is
// stopped (a busy machine slows it, so it runs for the load's time rather
// than for a count).
const soakProducerYAML = `
http: { enabled: false }
logger: { level: info, format: logfmt }
input:
  generate:
    count: 0
    batch_size: %d
    interval: %s
    mapping: |
      let n = counter() - 1
      root.k = "%s" + ($n %% %d).string()
      root.c = ($n / %d).floor().int64() + 1
      ` + poisonProducerLine + `
%s%soutput:
  kinesis:
    stream: %s
    partition_key: '${! this.k }'
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    max_in_flight: 8
    max_retries: 0
    backoff: { initial_interval: 50ms, max_interval: 1s, max_elapsed_time: 0s }
    aggregation: { enabled: %t }
`

// soakPadYAML pads each record of a stream with %d copies of %s. One
// thread: the default, one per core, hands consecutive batches to the
// output in whichever order their processing ends, and the output keeps a
// key's order only as the records reach it (seed 7 found big-k0/9 written
// after big-k0/10, a whole batch of both keys swapped with the next).
const soakPadYAML = `pipeline:
  threads: 1
  processors:
    - mapping: |
        root = this
        root.pad = range(0, %d).map_each(_ -> "%s").join("")
`

// startProducers launches one producer per stream; stopProducers ends
// them at the load's end.
func (s *soak) startProducers() ([]*child, error) {
	var out []*child
	for _, st := range s.streams {
		conf := filepath.Join(s.cfg.Dir, "producer-"+st.name+".yaml")
		if err := os.WriteFile(conf, []byte(producerConfig(st, s.front.URL)), 0o600); err != nil {
			return nil, err
		}
		c, err := s.launch(conf, filepath.Join(s.cfg.Dir, "producer-"+st.name+".log"))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// producerConfig is the config of st's producer, writing through endpoint.
func producerConfig(st *soakStream, endpoint string) string {
	prefix := keyPrefix(st)
	label := ""
	if st.dyn {
		// The incarnation's label, which the instances' mapping reports.
		label = fmt.Sprintf("      root.stream = %q\n", st.label)
	}
	pad := ""
	if st.padKiB > 0 {
		pad = fmt.Sprintf(soakPadYAML, st.padKiB*16, strings.Repeat("0123456789abcdef", 4))
	}
	return fmt.Sprintf(soakProducerYAML, st.keys, st.every, prefix, st.keys, st.keys, label, pad,
		st.name, testenv.Region, endpoint, testenv.AccessKey, testenv.SecretKey, st.aggregation)
}

// stopProducers stops the producers gracefully (SIGTERM: what they hold is
// written or dropped unwritten), at most 30 s each.
func stopProducers(ps []*child) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// producedCounters are what the checker expects of each key: counters 1
// up to the highest in the stream. The producers were stopped at the load's
// end, so a gap below it is a message the output lost; what they held
// unwritten when stopped is not counted.
func producedCounters(stream []Record) map[string]int {
	out := map[string]int{}
	for _, r := range stream {
		out[r.K] = max(out[r.K], r.C)
	}
	return out
}
