package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// child is a process the run started: an instance's incarnation or the
// producer. Every child is in runner.children from its start on, so cleanup
// kills and waits for each one, whichever way the run ends.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd was waited for
	err  error         // what Wait returned, read after done
}

// incarnation is one start of an instance.
type incarnation struct {
	name string // e.g. "b3": instance b, third start
	*child
}

// instanceYAML is a consumer instance: every record becomes a line with its
// key, counter, shard, sequence number, redelivery mark and delivery
// attempt, incarnation and time (chaosMapping); a poison record goes to the
// dead letter after three attempts (instanceOutput).
// chaosMaxAttempts is the instances' redelivery.max_attempts, written on
// their poison hand-over lines too (heldBehindPoison).
const chaosMaxAttempts = "3"

const instanceYAML = `
http: { enabled: false }
logger: { level: info, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
    start_position: %s
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis: { url: '%s' }
      group: %s
      commit_period: %s
    lease: { period: %s, rebalance_period: %s, handoff_timeout: 5s }
    shard_max_in_flight: 1
    shard_discovery_interval: 1s
    idle_poll_interval: 300ms
    redelivery: { max_attempts: ` + chaosMaxAttempts + `, dead_letter: ` + deadLetterLabel + ` }
%spipeline:
  processors:
    - mapping: |
%s
%sshutdown_timeout: 15s
`

// chaosMapping makes a record the delivery line of incarnation inc.
func chaosMapping(inc string) string {
	return `root.k = this.k
root.c = this.c
root.poison = this.poison.or(false)
root.shard = @kinesis_shard
root.seq = @kinesis_sequence_number
root.redelivered = @kinesis_redelivered.or("").string()
root.attempt = @kinesis_delivery_attempt.or("").string()
root.inst = "` + inc + `"
root.at = now()
root.batch = if this.poison.or(false) { batch_size() } else { deleted() }`
}

// names are the instances of the run: a, b and c, or with Standbys one
// more than the stream ever has open shards. No name is a prefix of
// another (start counts incarnations by it).
func (r *runner) names() []string {
	n := 3
	if r.cfg.Standbys {
		n = maxOpenShards(r.plan) + 1
	}
	names := make([]string, n)
	for i := range names {
		names[i] = string(rune('a' + i))
	}
	return names
}

// start launches a new incarnation of instance name.
func (r *runner) start(name string) error {
	r.mu.Lock()
	n := 1
	for _, o := range r.outputs {
		if strings.HasPrefix(filepath.Base(o), name) {
			n++
		}
	}
	inc := name + strconv.Itoa(n)
	out := filepath.Join(r.cfg.Dir, inc+".jsonl")
	r.outputs = append(r.outputs, out)
	r.mu.Unlock()

	p := r.plan
	conf := filepath.Join(r.cfg.Dir, inc+".yaml")
	startPosition := "trim_horizon"
	if r.cfg.EmptyRedis {
		startPosition = "latest"
	}
	endpoint, efo := r.front.URL, ""
	if r.cutter != nil {
		endpoint, efo = "https://"+r.cutter.Addr, "    enhanced_fan_out: { enabled: true }\n"
	}
	if r.cfg.ShardParallelism > 1 {
		efo += fmt.Sprintf("    shard_parallelism: %d\n", r.cfg.ShardParallelism)
	}
	if r.cfg.MaxBufferedBytes != "" {
		efo += fmt.Sprintf("    max_buffered_bytes: %s\n", r.cfg.MaxBufferedBytes)
	}
	streams := streamName
	if r.cfg.DeniedShard {
		streams += ", " + deniedStream
	}
	inner := fmt.Sprintf("file: { path: %s, codec: lines }", out)
	if r.sink != nil {
		inner = r.sink.output(inc) // which writes to out
	}
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(instanceYAML, streams, startPosition, testenv.Region, endpoint,
		testenv.AccessKey, testenv.SecretKey, r.red.URLAs(testenv.ACLInput), group, p.CommitPeriod, p.LeasePeriod, p.Rebalance, efo,
		indent(chaosMapping(inc), 8), instanceOutput(chaosMapping(inc), inner, deadLetterPath(out), handoverPath(out), chaosMaxAttempts))), 0o600); err != nil {
		return err
	}
	c, err := r.launch(conf, filepath.Join(r.cfg.Dir, inc+".log"))
	if err != nil {
		return err
	}
	in := &incarnation{name: inc, child: c}
	r.mu.Lock()
	r.instances[name] = in
	r.mu.Unlock()
	return nil
}

// launch starts the binary with conf, its output going to logPath, and
// registers the child before anything else can fail.
func (r *runner) launch(conf, logPath string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(r.cfg.Binary, "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Should this process die without running cleanup (a test binary
	// killed at its timeout, make chaos interrupted twice), the kernel
	// kills the child. See diesWithParent for why the thread that forks
	// does not matter here.
	cmd.SysProcAttr = diesWithParent()
	if r.cutter != nil {
		// Trust kinesis-mock's test CA; read its subscriptions without the
		// initial-response event it omits.
		cmd.Env = append(os.Environ(), "AWS_CA_BUNDLE="+r.kin.CAFile, consumer.EnvEmulatorNoInitialResponse+"=true")
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", r.cfg.Binary, err)
	}
	// The child has its own descriptor; ours is not needed.
	logf.Close()
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	r.mu.Lock()
	r.children = append(r.children, c)
	r.mu.Unlock()
	if r.cfg.Started != nil {
		r.cfg.Started(cmd.Process.Pid)
	}
	return c, nil
}

// ensureRunning starts instance name again unless it is running.
func (r *runner) ensureRunning(name string) error {
	r.mu.Lock()
	in := r.instances[name]
	r.mu.Unlock()
	if in != nil {
		select {
		case <-in.done:
		default:
			return nil
		}
	}
	return r.start(name)
}

// outputFiles lists the delivery file of every incarnation so far.
func (r *runner) outputFiles() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.outputs...)
}

// stopAll stops every instance gracefully (SIGTERM: commit and release).
func (r *runner) stopAll() {
	r.mu.Lock()
	insts := r.instances
	r.instances = map[string]*incarnation{}
	r.mu.Unlock()
	for _, in := range insts {
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, in := range insts {
		select {
		case <-in.done:
		case <-time.After(30 * time.Second):
			_ = in.cmd.Process.Kill()
			<-in.done
		}
	}
}
