package coordinator

import (
	"testing"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/stretchr/testify/assert"
)

func TestReadyShardsGate(t *testing.T) {
	split := map[string]consumer.Shard{
		"p":  {ID: "p", Closed: true},
		"c1": {ID: "c1", Parent: "p"},
		"c2": {ID: "c2", Parent: "p"},
	}
	merge := map[string]consumer.Shard{
		"a": {ID: "a", Closed: true},
		"b": {ID: "b", Closed: true},
		"m": {ID: "m", Parent: "a", Adjacent: "b"},
	}
	for _, tc := range []struct {
		name   string
		listed map[string]consumer.Shard
		closed map[string]bool
		want   []string
	}{
		{"split: children wait for the parent", split, nil, []string{"p"}},
		{"split: children ready once the parent is closed", split, map[string]bool{"p": true}, []string{"c1", "c2"}},
		{"merge: waits while one parent is open", merge, map[string]bool{"a": true}, []string{"b"}},
		{"merge: waits for the other parent too", merge, map[string]bool{"b": true}, []string{"a"}},
		{"merge: ready once both parents are closed", merge, map[string]bool{"a": true, "b": true}, []string{"m"}},
		{"trimmed parent counts as closed", map[string]consumer.Shard{"c": {ID: "c", Parent: "gone"}}, nil, []string{"c"}},
		{"merge with one parent trimmed", map[string]consumer.Shard{"b": {ID: "b"}, "m": {ID: "m", Parent: "gone", Adjacent: "b"}}, nil, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readyShards(tc.listed, tc.closed)
			if tc.want == nil {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
