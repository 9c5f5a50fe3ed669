package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Secrets of the security tests: distinctive, so a grep cannot miss them.
// The emulators accept any AWS secret.
const (
	secAWSSecret     = "AWSsecretMustNotLeak9f3k"
	secRedisPassword = "RedisPwMustNotLeak7q2z"
)

const secureInputYAML = `
http: { enabled: false }
logger: { level: %s, format: logfmt }
input:
  kinesis:
    streams: [ %s ]
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s }
    checkpoint:
      redis:
        url: '%s'
        tls: { enabled: %t, root_cas_file: '%s' }
      group: secure
      commit_period: 200ms
    lease: { period: 2s, rebalance_period: 500ms }
    idle_poll_interval: 200ms
output:
  file: { path: %s, codec: lines }
`

// startLogged writes conf to a file and runs the binary on it (see
// startBinary); it returns the log's path.
func startLogged(t *testing.T, dir, conf string) (cmd *exec.Cmd, logPath string) {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	cmd, logf := startBinary(t, dir, "connect-kinesis", path, nil)
	return cmd, logf.Name()
}

func assertNoSecrets(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		assert.NotContains(t, text, s, "a secret appears in %s", what)
	}
}

// TestIntegrationRedisTLSACLEndToEnd: the input reads a stream with its
// checkpoints in a Redis that serves TLS only, as the input user of the
// shipped ACL file (config/deploy/redis-acl.conf), at TRACE level; neither
// the ACL password nor the AWS secret appears in the log, and the
// checkpoints are in Redis.
func TestIntegrationRedisTLSACLEndToEnd(t *testing.T) {
	t.Parallel()
	k := testenv.NewKinesisMock(t)
	r := testenv.NewRedis(t, testenv.RedisOptions{TLS: true, ShippedACL: true})
	aclPassword := testenv.ACLPassword(testenv.ACLInput)
	const stream = "secure"
	k.MustCreateStream(t, stream, 2)
	putKeyed(t, k.Client(), stream, 40)

	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	require.True(t, strings.HasPrefix(r.URLAs(testenv.ACLInput), "rediss://"+testenv.ACLInput+":"+aclPassword+"@"))
	conf := fmt.Sprintf(secureInputYAML, "TRACE", stream, testenv.Region, k.Endpoint, testenv.AccessKey, secAWSSecret,
		r.URLAs(testenv.ACLInput), true, r.Certs.CA, out)
	cmd, logPath := startLogged(t, dir, conf)

	require.Eventually(t, func() bool { return len(readLines(t, out)) >= 40 }, 60*time.Second, 100*time.Millisecond,
		"every record is read with TLS + ACL checkpoints")
	rc := r.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		keys, err := rc.Keys(t.Context(), "kinesis:{secure:*}:ckpt").Result()
		if err != nil || len(keys) != 1 {
			return false
		}
		n, err := rc.HLen(t.Context(), keys[0]).Result()
		return err == nil && n == 2
	}, 30*time.Second, 100*time.Millisecond, "both shards' checkpoints are committed over TLS as the ACL user")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	_ = cmd.Wait()
	b, err := os.ReadFile(logPath)
	require.NoError(t, err)
	log := string(b)
	require.NotEmpty(t, log)
	assert.Contains(t, log, "level=trace", "the log really ran at TRACE")
	assertNoSecrets(t, "the TRACE log", log, secAWSSecret, aclPassword)
}

// TestIntegrationSecretsNeverLogged runs the input at TRACE with a wrong
// Redis password and then against a stopped Redis, so that authentication and
// connection errors are logged over and over; neither the password nor the
// AWS secret may appear.
func TestIntegrationSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	r := testenv.NewRedis(t, testenv.RedisOptions{Password: "the-right-one"})
	const stream = "secrets"
	k.MustCreateStream(t, stream, 1)

	for _, tc := range []struct {
		name string
		url  string
		stop bool
	}{
		{"wrong password", "redis://:" + secRedisPassword + "@" + r.Addr, false},
		{"wrong ACL user", "redis://nobody:" + secRedisPassword + "@" + r.Addr + "/0", false},
		{"unreachable", "redis://:" + secRedisPassword + "@127.0.0.1:1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conf := fmt.Sprintf(secureInputYAML, "TRACE", stream, testenv.Region, k.Endpoint, testenv.AccessKey, secAWSSecret,
				tc.url, false, "", filepath.Join(dir, "out.jsonl"))
			_, logPath := startLogged(t, dir, conf)
			var log string
			require.Eventually(t, func() bool {
				b, _ := os.ReadFile(logPath)
				log = string(b)
				return strings.Count(log, "checkpoint store") >= 2
			}, badConfigDeadline, 100*time.Millisecond, "the input does not report and retry the Redis failure")
			assertNoSecrets(t, "the log", log, secAWSSecret, secRedisPassword)
		})
	}
}

// TestIntegrationOutputSecretsNeverLogged writes through the output at TRACE
// with the proxy-free emulator, then against a stream that does not exist so
// that errors are logged too; the AWS secret never appears.
func TestIntegrationOutputSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	k := testenv.SharedKinesisMock(t)
	k.MustCreateStream(t, "secrets-out", 1)
	for stream, until := range map[string]string{"secrets-out": "Pipeline has terminated", "no-such-stream": "does not exist in region"} {
		t.Run(stream, func(t *testing.T) {
			conf := fmt.Sprintf(`
http: { enabled: false }
logger: { level: TRACE, format: logfmt }
input:
  generate: { count: 5, interval: '', mapping: 'root = {"n": counter()}' }
output:
  kinesis:
    stream: %s
    partition_key: '${! this.n }'
    region: %s
    endpoint: %s
    credentials: { id: %s, secret: %s, token: TokenMustNotLeak }
`, stream, testenv.Region, k.Endpoint, testenv.AccessKey, secAWSSecret)
			log := runUntilLogged(t, conf, until)
			assert.Contains(t, log, "level=trace")
			assertNoSecrets(t, "the output's TRACE log", log, secAWSSecret, "TokenMustNotLeak")
		})
	}
}

// TestEchoRedactsSecrets: `connect-kinesis echo` prints the config back
// without the AWS secret, the session token or the Redis password.
func TestEchoRedactsSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := fmt.Sprintf(`
input:
  kinesis:
    streams: [ s ]
    credentials: { id: %s, secret: %s, token: TokenMustNotLeak }
    checkpoint:
      redis: { url: 'redis://user:%s@redis.internal:6379/0' }
      group: g
output:
  kinesis:
    stream: s
    partition_key: '${! uuid_v4() }'
    credentials: { id: %s, secret: %s }
`, testenv.AccessKey, secAWSSecret, secRedisPassword, testenv.AccessKey, secAWSSecret)
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	out := run(t, "-c", path, "echo")
	assert.Contains(t, out, "group: g", "echo prints the config")
	assert.Contains(t, out, "SECRET_SCRUBBED", "secret fields are shown scrubbed")
	assertNoSecrets(t, "echo", out, secAWSSecret, secRedisPassword, "TokenMustNotLeak")
}
