package streams

import (
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRules(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		tags    map[string]string
		want    Rules
		errHas  string
	}{
		{name: "names only stay as today", entries: []string{"orders", "arn:aws:kinesis:us-east-1:1:stream/x"},
			want: Rules{Names: []string{"orders", "arn:aws:kinesis:us-east-1:1:stream/x"}}},
		{name: "names and patterns", entries: []string{"orders", "tenant-*", "day-????"},
			want: Rules{Names: []string{"orders"}, Patterns: []string{"tenant-*", "day-????"}}},
		{name: "tags with a pattern", entries: []string{"*"}, tags: map[string]string{"team": "a"},
			want: Rules{Patterns: []string{"*"}, Tags: map[string]string{"team": "a"}}},
		{name: "tags without a pattern", entries: []string{"orders"}, tags: map[string]string{"team": "a"}, errHas: `field stream_tags: tags select among the streams a pattern of streams finds`},
		{name: "an ARN pattern", entries: []string{"arn:aws:kinesis:us-east-1:1:stream/t-*"}, errHas: `write the name part only, e.g. "t-*"`},
		{name: "brackets", entries: []string{"t-[ab]*"}, errHas: "patterns take `*` (any characters) and `?` (one character) only"},
		{name: "a pattern twice", entries: []string{"t-*", "t-*"}, errHas: `the pattern "t-*" is listed twice`},
		{name: "an empty tag key", entries: []string{"*"}, tags: map[string]string{"": "x"}, errHas: "a tag key is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRules(tc.entries, tc.tags)
			if tc.errHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.want.Patterns) > 0, got.Dynamic())
		})
	}
}

func TestRulesMatch(t *testing.T) {
	r, err := ParseRules([]string{"orders", "tenant-*", "day-??"}, map[string]string{"env": "prod"})
	require.NoError(t, err)
	for name, want := range map[string]bool{
		"tenant-1": true, "tenant-": true, "tenant": false, "xtenant-1": false,
		"day-01": true, "day-1": false, "day-001": false,
		// An explicit name is not a pattern: it is read as named, not
		// found by listing.
		"orders": false,
	} {
		assert.Equal(t, want, r.MatchName(name), name)
	}
	assert.True(t, r.MatchTags(map[string]string{"env": "prod", "team": "a"}))
	assert.False(t, r.MatchTags(map[string]string{"env": "dev"}))
	assert.False(t, r.MatchTags(nil))
	all, err := ParseRules([]string{"*"}, nil)
	require.NoError(t, err)
	assert.True(t, all.MatchTags(nil), "no tag rule: every stream matches")
}

// TestConfigFromParsed parses the discovery fields through a spec as the
// input will, so the defaults and the errors are what a user sees.
func TestConfigFromParsed(t *testing.T) {
	spec := service.NewConfigSpec().Fields(append([]*service.ConfigField{service.NewStringListField(FieldStreams)}, Fields()...)...)
	parse := func(t *testing.T, yaml string) (Config, error) {
		t.Helper()
		conf, err := spec.ParseYAML(yaml, nil)
		require.NoError(t, err)
		entries, err := conf.FieldStringList(FieldStreams)
		require.NoError(t, err)
		return ConfigFromParsed(conf, entries)
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := parse(t, `streams: [ orders, "t-*" ]`)
		require.NoError(t, err)
		assert.Equal(t, time.Minute, c.Interval)
		assert.Equal(t, 24*time.Hour, c.DeletedRetention)
		assert.Equal(t, NewStreamTrimHorizon, c.NewStreamStart)
		assert.Equal(t, []string{"t-*"}, c.Rules.Patterns)
		assert.Empty(t, c.Rules.Tags)
	})
	t.Run("every field", func(t *testing.T) {
		c, err := parse(t, `
streams: [ "*" ]
stream_tags: { team: payments }
stream_discovery_interval: 30s
new_stream_start_position: latest
deleted_stream_retention: 1h
`)
		require.NoError(t, err)
		assert.Equal(t, Config{Rules: Rules{Patterns: []string{"*"}, Tags: map[string]string{"team": "payments"}},
			Interval: 30 * time.Second, NewStreamStart: NewStreamLatest, DeletedRetention: time.Hour}, c)
	})
	for name, tc := range map[string]struct{ yaml, errHas string }{
		"interval too short": {`{streams: ["t-*"], stream_discovery_interval: 1s}`, "field stream_discovery_interval: 1s is shorter than 5s"},
		"negative retention": {`{streams: ["t-*"], deleted_stream_retention: -1h}`, "field deleted_stream_retention: -1h0m0s is negative"},
		"unknown start":      {`{streams: ["t-*"], new_stream_start_position: at_timestamp}`, `field new_stream_start_position: "at_timestamp" is not one of`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.yaml)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.errHas)
		})
	}
}

func TestStartFor(t *testing.T) {
	for _, tc := range []struct {
		newStart string
		appeared bool
		want     string
	}{
		{NewStreamTrimHorizon, false, "latest"},
		{NewStreamTrimHorizon, true, "trim_horizon"},
		{NewStreamLatest, true, "latest"},
		{NewStreamAsStart, true, "latest"},
	} {
		c := Config{NewStreamStart: tc.newStart}
		assert.Equal(t, tc.want, c.StartFor(tc.appeared, "latest"), "%s appeared=%v", tc.newStart, tc.appeared)
	}
}
