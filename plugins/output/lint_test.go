package output

import (
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every cross-field rule the constructor enforces is reported by lint, with
// the field's name, so a config that lints clean also starts.
func TestLintRejectsWhatTheConstructorRejects(t *testing.T) {
	for name, tc := range map[string]struct{ fields, want string }{
		"aggregate above max_record_size": {"  max_record_size: 1000\n  aggregation: { enabled: true, max_bytes: 2000 }\n", "field aggregation.max_bytes: 2000 is out of range; accepted values are 256 to max_record_size (1000)"},
		"aggregate too small":             {"  aggregation: { enabled: true, max_bytes: 10 }\n", "field aggregation.max_bytes: 10 is out of range"},
		"max_interval below initial":      {"  backoff: { initial_interval: 2s, max_interval: 1s }\n", "field backoff.max_interval: 1s is shorter than backoff.initial_interval (2s)"},
		"id without secret":               {"  credentials: { id: AKID }\n", "fields credentials.id and credentials.secret"},
		"region not a region":             {"  region: US-EAST-1\n", `field region: "US-EAST-1" is not an AWS region name`},
	} {
		t.Run(name, func(t *testing.T) {
			lints := lintOutput(t, tc.fields)
			require.Len(t, lints, 1, "exactly one message: %v", lints)
			assert.Contains(t, lints[0], tc.want)
		})
	}
	assert.Empty(t, lintOutput(t, "  aggregation: { enabled: false, max_bytes: 10 }\n"), "max_bytes only matters with aggregation")
	assert.Empty(t, lintOutput(t, ""), "the defaults lint clean")
}

func lintOutput(t *testing.T, fields string) []string {
	t.Helper()
	conf := "kinesis:\n  stream: events\n  partition_key: '${! uuid_v4() }'\n" + fields
	lints, err := service.GlobalEnvironment().NewComponentConfigLinter().LintOutputYAML([]byte(conf))
	require.NoError(t, err)
	var out []string
	for _, l := range lints {
		out = append(out, l.What)
	}
	return out
}
