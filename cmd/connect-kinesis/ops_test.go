package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The top-level help names this binary and suggests commands that work here.
func TestHelpNamesThisBinaryAndItsComponents(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"help"}} {
		out := run(t, args...)
		assert.Contains(t, out, "connect-kinesis - Amazon Kinesis Data Streams pipelines")
		assert.NotContains(t, out, "mundane")
		assert.NotContains(t, out, "kafka")
		creates := regexp.MustCompile(`connect-kinesis (create \S+)`).FindAllStringSubmatch(out, -1)
		require.NotEmpty(t, creates, "the help suggests a create command:\n%s", out)
		for _, c := range creates {
			conf := run(t, strings.Fields(c[1])...)
			assert.Contains(t, conf, "kinesis:", "%s creates a kinesis config", c[1])
		}
	}
}

// writeFile writes text to a new file in a test directory.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// A config from `create`, with only its required fields filled, lints clean
// and starts: it gets as far as connecting to Redis.
func TestCreatedConfigStartsOnceRequiredFieldsAreFilled(t *testing.T) {
	t.Parallel()
	conf := run(t, "create", "kinesis//drop")
	require.Contains(t, conf, "streams: [] # No default (required)")
	conf = strings.Replace(conf, "streams: []", "streams: [ orders ]", 1)
	conf = strings.Replace(conf, `url: ""`, "url: redis://127.0.0.1:1", 1)
	conf = strings.Replace(conf, `group: ""`, "group: created", 1)
	conf = strings.Replace(conf, "address: 0.0.0.0:4195", "address: 127.0.0.1:0", 1)
	conf = strings.Replace(conf, `region: ""`, "region: us-east-1", 1)
	path := writeFile(t, "created.yaml", conf)
	assert.NotContains(t, conf, "SECRET_SCRUBBED", "create prints a usable Redis URL")

	out, err := exec.CommandContext(t.Context(), binary, "lint", path).CombinedOutput()
	require.NoError(t, err, "lint of the created config:\n%s", out)

	log := runUntilLogged(t, conf, "checkpoint store")
	assert.NotContains(t, log, "field start_timestamp")
}

// The "Common config" of each plugin's docs, with its required fields filled,
// lints clean.
func TestDocsCommonConfigLints(t *testing.T) {
	t.Parallel()
	for page, fill := range map[string]func(string) string{
		"inputs/kinesis.md": func(c string) string {
			c = strings.Replace(c, "streams: []", "streams: [ orders ]", 1)
			c = strings.Replace(c, `url: ""`, "url: redis://localhost:6379", 1)
			c = strings.Replace(c, `group: ""`, "group: billing", 1)
			return c + "output:\n  drop: {}\n"
		},
		"outputs/kinesis.md": func(c string) string {
			c = strings.Replace(c, `stream: ""`, "stream: orders", 1)
			return "input:\n  generate: { mapping: 'root = {}' }\n" + c
		},
	} {
		t.Run(page, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "components", page))
			require.NoError(t, err)
			m := regexp.MustCompile("(?s)## Common config\n\n```yaml\n(.*?)```").FindSubmatch(doc)
			require.NotNil(t, m, "the page has a Common config block")
			conf := fill(string(m[1]))
			assert.NotContains(t, conf, "SECRET_SCRUBBED")
			out, err := exec.CommandContext(t.Context(), binary, "lint", writeFile(t, "common.yaml", conf)).CombinedOutput()
			assert.NoError(t, err, "lint of the docs' common config:\n%s\n%s", conf, out)
		})
	}
}

// `lint` rejects the cross-field mistakes the plugins reject at start, and
// names the field.
func TestLintCatchesCrossFieldMistakes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ conf, want string }{
		"start_timestamp without at_timestamp": {badInputConfig(map[string]string{"start_timestamp": "2024-05-01T12:00:00Z"}), "field start_timestamp: only used with start_position: at_timestamp"},
		"no stream":                            {badInputConfig(map[string]string{"streams": "[]"}), "field streams: write a list of at least one stream name or ARN"},
		"stream by name and ARN":               {badInputConfig(map[string]string{"streams": "[ orders, 'arn:aws:kinesis:us-east-1:123456789012:stream/orders' ]"}), "field streams: one stream is listed by name and by ARN"},
		"output aggregate above record size":   {badOutputConfig(map[string]string{"max_record_size": "1000", "aggregation": "{ enabled: true, max_bytes: 2000 }"}), "field aggregation.max_bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.CommandContext(t.Context(), binary, "lint", writeFile(t, "bad.yaml", tc.conf)).CombinedOutput()
			require.Error(t, err, "lint must fail:\n%s", out)
			assert.Contains(t, string(out), tc.want)
		})
	}
}

// An unreachable Redis is reported as the field to fix, without the URL's
// password and without go-redis' own connection-pool lines.
func TestRedisUnreachableNamesTheField(t *testing.T) {
	t.Parallel()
	conf := badInputConfig(map[string]string{"checkpoint": "{ redis: { url: 'redis://:pw-must-not-leak@127.0.0.1:1' }, group: g }"})
	log := runUntilLogged(t, conf, "checkpoint store")
	assert.Contains(t, log, "field checkpoint.redis.url: reaching Redis: dial tcp 127.0.0.1:1")
	assert.NotContains(t, log, "pw-must-not-leak")
	assert.NotContains(t, log, "pool.go", "go-redis' pool lines are not printed")
	assert.NotContains(t, log, "redis: connection pool")
}
