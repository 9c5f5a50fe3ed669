package input

import (
	"strings"
	"testing"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/coordinator"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lintInput lints `kinesis:` with the given extra fields, as `connect-kinesis
// lint` does, and returns the messages.
func lintInput(t *testing.T, fields string) []string {
	t.Helper()
	conf := "kinesis:\n  streams: [ orders ]\n  checkpoint: { redis: { url: 'redis://localhost:6379' }, group: g }\n" + fields
	lints, err := service.GlobalEnvironment().NewComponentConfigLinter().LintInputYAML([]byte(conf))
	require.NoError(t, err)
	var out []string
	for _, l := range lints {
		out = append(out, l.What)
	}
	return out
}

// Every cross-field rule the constructor enforces is reported by lint, with
// the field's name, so a config that lints clean also starts.
func TestLintRejectsWhatTheConstructorRejects(t *testing.T) {
	for name, tc := range map[string]struct{ fields, want string }{
		"timestamp without at_timestamp": {"  start_timestamp: 2024-05-01T12:00:00Z\n", "field start_timestamp: only used with start_position: at_timestamp"},
		"at_timestamp without timestamp": {"  start_position: at_timestamp\n", "field start_timestamp: required with start_position: at_timestamp"},
		"timestamp not RFC3339":          {"  start_position: at_timestamp\n  start_timestamp: yesterday\n", `field start_timestamp: "yesterday" is not an RFC3339 time`},
		"no stream":                      {"  streams: []\n", "field streams: write a list of at least one stream name or ARN, e.g. [ orders ]"},
		"an empty stream":                {"  streams: [ orders, '' ]\n", "field streams: an entry is empty"},
		"stream listed twice":            {"  streams: [ orders, orders ]\n", "field streams: a stream is listed twice"},
		"stream by name and ARN":         {"  streams: [ orders, 'arn:aws:kinesis:us-east-1:123456789012:stream/orders' ]\n", "field streams: one stream is listed by name and by ARN"},
		"same name and ARN, same region": {"  region: us-east-1\n  streams: [ orders, 'arn:aws:kinesis:us-east-1:123456789012:stream/orders' ]\n", "field streams: one stream is listed by name and by ARN"},
		"idle poll below poll":           {"  poll_interval: 500ms\n  idle_poll_interval: 100ms\n", "field idle_poll_interval: 100ms must be at least poll_interval (500ms)"},
		"idle poll below default poll":   {"  idle_poll_interval: 100ms\n", "field idle_poll_interval: 100ms must be at least poll_interval (200ms)"},
		"failover without master":        {"  checkpoint: { redis: { url: 'redis://localhost:26379', kind: failover }, group: g }\n", "field checkpoint.redis.master: required with checkpoint.redis.kind: failover"},
		"redis URL scheme":               {"  checkpoint: { redis: { url: 'http://u:pw@localhost:6379' }, group: g }\n", "field checkpoint.redis.url: use a redis:// or rediss:// URL"},
		"id without secret":              {"  credentials: { id: AKID }\n", "fields credentials.id and credentials.secret"},
		"id and profile":                 {"  credentials: { id: AKID, secret: s, profile: p }\n", "fields credentials.id and credentials.profile"},
		"external id without role":       {"  credentials: { role_external_id: x }\n", "field credentials.role_external_id"},
		"region not a region":            {"  region: us east 1\n", `field region: "us east 1" is not an AWS region name`},
		"instance id with a pipe":        {"  lease: { instance_id: 'pod|1' }\n", `field lease.instance_id: "pod|1" must not contain spaces or '|'`},
		"stream tags without a pattern":  {"  stream_tags: { env: prod }\n", "field stream_tags: tags select among the streams a pattern of streams finds"},
		"discovery too often":            {"  streams: [ 't-*' ]\n  stream_discovery_interval: 1s\n", "field stream_discovery_interval: 1s is shorter than 5s"},
	} {
		t.Run(name, func(t *testing.T) {
			lints := lintInput(t, tc.fields)
			require.Len(t, lints, 1, "exactly one message: %v", lints)
			assert.Contains(t, lints[0], tc.want)
			assert.NotContains(t, lints[0], "pw", "the Redis URL is never quoted")
		})
	}
}

func TestLintAcceptsValidCombinations(t *testing.T) {
	for name, fields := range map[string]string{
		"defaults":                       "",
		"at_timestamp with timestamp":    "  start_position: at_timestamp\n  start_timestamp: 2024-05-01T12:00:00.5+02:00\n",
		"empty timestamp (as generated)": "  start_timestamp: \"\"\n",
		"ARN of another region":          "  region: eu-west-1\n  streams: [ orders, 'arn:aws:kinesis:us-east-1:123456789012:stream/orders' ]\n",
		"two ARNs, two accounts":         "  streams: [ 'arn:aws:kinesis:us-east-1:111111111111:stream/orders', 'arn:aws:kinesis:us-east-1:222222222222:stream/orders' ]\n",
		"failover with master in URL":    "  checkpoint: { redis: { url: 'redis://localhost:26379?master_name=m', kind: failover }, group: g }\n",
		"local region with endpoint":     "  region: local\n  endpoint: http://localhost:4567\n",
		"a pattern with tags":            "  streams: [ orders, 'tenant-*' ]\n  stream_tags: { env: prod }\n  stream_discovery_interval: 30s\n",
	} {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, lintInput(t, fields))
		})
	}
}

// The constructor keeps the stream rules for configs that were never linted.
func TestCheckStreams(t *testing.T) {
	arn := "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
	for name, tc := range map[string]struct {
		streams []string
		region  string
		want    string
	}{
		"name and ARN":              {[]string{"orders", arn}, "", "field streams: orders and " + arn + " are one stream"},
		"name and ARN, same region": {[]string{arn, "orders"}, "us-east-1", "are one stream"},
		"twice":                     {[]string{"orders", "orders"}, "", "field streams: orders is listed twice"},
		"empty entry":               {[]string{""}, "", "field streams: an entry is empty"},
		"ARN of another region":     {[]string{"orders", arn}, "eu-west-1", ""},
		"different streams":         {[]string{"orders", "payments"}, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkStreams(tc.streams, tc.region)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tc.want), err.Error())
		})
	}
}

// lease.instance_id names the instance in the group in place of the
// generated host-pid-random id; an id that would corrupt a lease value fails
// at start.
func TestInstanceID(t *testing.T) {
	parse := func(lease string) (Config, error) {
		conf, err := Spec().ParseYAML("streams: [ orders ]\ncheckpoint: { redis: { url: 'redis://localhost:6379' }, group: g }\n"+lease, nil)
		require.NoError(t, err)
		return ConfigFromParsed(conf)
	}
	c, err := parse("lease: { instance_id: orders-7f9c-x2 }")
	require.NoError(t, err)
	cons, err := coordinator.New(c.Consumer, nil, nil, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "orders-7f9c-x2", cons.Owner())

	c, err = parse("")
	require.NoError(t, err)
	cons, err = coordinator.New(c.Consumer, nil, nil, nil, nil)
	require.NoError(t, err)
	assert.Regexp(t, `^.+-[0-9]+-[0-9a-f]{8}$`, cons.Owner(), "empty: host, pid and a random suffix")

	_, err = parse("lease: { instance_id: 'pod|1' }")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field lease.instance_id")
}

// Lint's stream rules say what the constructor says: a config `lint` passes
// does not fail at start over its streams (streams: [] used to lint clean).
func TestEmptyStreamsFailLintAndConstructor(t *testing.T) {
	for name, tc := range map[string]struct{ streams, want string }{
		"no stream":      {"[]", "at least one stream name or ARN"},
		"an empty entry": {"[ orders, '' ]", "field streams: an entry is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			lints := lintInput(t, "  streams: "+tc.streams+"\n")
			require.Len(t, lints, 1, "exactly one message: %v", lints)
			assert.Contains(t, lints[0], tc.want)

			conf, err := Spec().ParseYAML("streams: "+tc.streams+"\ncheckpoint: { redis: { url: 'redis://localhost:6379' }, group: g }\n", nil)
			require.NoError(t, err)
			_, err = ConfigFromParsed(conf)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// lintInputLines lints a whole `kinesis:` block and returns each message
// with the line it points at.
func lintInputLines(t *testing.T, conf string) map[string]int {
	t.Helper()
	lints, err := service.GlobalEnvironment().NewComponentConfigLinter().LintInputYAML([]byte(conf))
	require.NoError(t, err)
	out := map[string]int{}
	for _, l := range lints {
		out[l.What] = l.Line
	}
	return out
}

// What the constructor refuses at start lint refuses too, once, pointing at
// the line of the field to fix (issue 39 item 9: a size or a duration that
// does not parse linted clean, a stream given as a string gave a second,
// misleading message, and every message pointed at the block's first line).
func TestLintPointsAtTheFieldToFix(t *testing.T) {
	base := "kinesis:\n  streams: [ orders ]\n  checkpoint:\n    redis: { url: 'redis://localhost:6379' }\n    group: g\n"
	for name, tc := range map[string]struct {
		conf string
		want string
		line int
	}{
		"size without a known unit": {base + "  max_buffered_bytes: 12XB\n", `field max_buffered_bytes: "12XB" is not a size`, 6},
		"duration without a unit": {
			"kinesis:\n  streams: [ orders ]\n  checkpoint:\n    redis: { url: 'redis://localhost:6379' }\n    group: g\n    commit_period: 5\n",
			"field checkpoint.commit_period: 5 has no unit; write it like 5s", 6,
		},
		"duration that is not one": {base + "  poll_interval: soon\n", `field poll_interval: "soon" is not a duration`, 6},
		"streams as a string":      {"kinesis:\n  checkpoint:\n    redis: { url: 'redis://localhost:6379' }\n    group: g\n  streams: events\n", "field streams: write a list of at least one stream name or ARN, e.g. [ orders ]", 5},
		"no stream":                {"kinesis:\n  checkpoint:\n    redis: { url: 'redis://localhost:6379' }\n    group: g\n  streams: []\n", "field streams: write a list of at least one stream name or ARN, e.g. [ orders ]", 5},
		"an empty stream":          {"kinesis:\n  checkpoint:\n    redis: { url: 'redis://localhost:6379' }\n    group: g\n  streams: [ orders, '' ]\n", "field streams: an entry is empty; list stream names or ARNs", 5},
		"timestamp not RFC3339":    {base + "  start_position: at_timestamp\n  start_timestamp: yesterday\n", `field start_timestamp: "yesterday" is not an RFC3339 time, e.g. 2024-05-01T12:00:00Z`, 7},
		"redis URL scheme":         {"kinesis:\n  streams: [ orders ]\n  checkpoint:\n    group: g\n    redis:\n      url: 'http://localhost:6379'\n", "field checkpoint.redis.url: use a redis:// or rediss:// URL, e.g. redis://localhost:6379", 6},
		"instance id with a pipe":  {base + "  lease:\n    instance_id: 'pod|1'\n", `field lease.instance_id: "pod|1" must not contain spaces or '|', e.g. the pod name`, 7},
	} {
		t.Run(name, func(t *testing.T) {
			lints := lintInputLines(t, tc.conf)
			if name == "streams as a string" {
				// Benthos' own type check says "expected array value"
				// there too; the plugin's message says what to write.
				assert.Equal(t, tc.line, lints["expected array value"], "%v", lints)
				delete(lints, "expected array value")
			}
			require.Len(t, lints, 1, "exactly one message: %v", lints)
			for what, line := range lints {
				assert.Contains(t, what, tc.want)
				assert.Equal(t, tc.line, line, "the line of the field: %s", what)
			}
		})
	}
}
