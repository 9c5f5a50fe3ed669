package checkpointer

import (
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigFromParsed(t *testing.T) {
	spec := service.NewConfigSpec().Fields(Fields()...)
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{
			name: "defaults",
			yaml: "checkpoint: {redis: {url: 'redis://:pw@localhost:6379/2'}, group: g}",
			check: func(t *testing.T, c Config) {
				assert.Equal(t, KindSimple, c.RedisKind)
				assert.Equal(t, "kinesis", c.KeyPrefix)
				assert.Equal(t, 5*time.Second, c.CommitPeriod)
				assert.Equal(t, 10*time.Second, c.LeasePeriod)
				assert.Equal(t, 10*time.Second, c.RebalancePeriod)
				assert.Equal(t, 10*time.Second, c.HandoffTimeout)
				assert.Nil(t, c.TLS)
			},
		},
		{
			name: "everything set",
			yaml: `
checkpoint:
  redis: {url: 'redis://s1:26379?addr=s2:26379', kind: failover, master: mymaster}
  group: g
  key_prefix: kin
  commit_period: 1s
lease: {period: 3s, rebalance_period: 4s, handoff_timeout: 5s}`,
			check: func(t *testing.T, c Config) {
				assert.Equal(t, KindFailover, c.RedisKind)
				assert.Equal(t, "mymaster", c.RedisMaster)
				assert.Equal(t, "kin", c.KeyPrefix)
				assert.Equal(t, time.Second, c.CommitPeriod)
				assert.Equal(t, 3*time.Second, c.LeasePeriod)
				assert.Equal(t, 4*time.Second, c.RebalancePeriod)
				assert.Equal(t, 5*time.Second, c.HandoffTimeout)
			},
		},
		{name: "group missing", yaml: "checkpoint: {redis: {url: 'redis://localhost'}, group: ''}", wantErr: "field checkpoint.group: required"},
		{name: "group with brace", yaml: "checkpoint: {redis: {url: 'redis://localhost'}, group: 'a}b'}", wantErr: "field checkpoint.group"},
		{name: "bad scheme", yaml: "checkpoint: {redis: {url: 'http://localhost'}, group: g}", wantErr: "field checkpoint.redis.url"},
		{name: "failover without master", yaml: "checkpoint: {redis: {url: 'redis://localhost', kind: failover}, group: g}", wantErr: "field checkpoint.redis.master"},
		{name: "zero commit period", yaml: "checkpoint: {redis: {url: 'redis://localhost'}, group: g, commit_period: 0s}", wantErr: "field checkpoint.commit_period"},
		{name: "tiny lease period", yaml: "checkpoint: {redis: {url: 'redis://localhost'}, group: g}\nlease: {period: 1ms}", wantErr: "field lease.period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parsed, err := spec.ParseYAML(tc.yaml, nil)
			if err != nil {
				require.NotEmpty(t, tc.wantErr, "parse: %v", err)
				return
			}
			c, err := ConfigFromParsed(parsed)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestRedisURLNeverInErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.Group = "redis://user:hunter2@localhost:6379?bogus=1", "g"
	_, err := NewRedisClient(cfg)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
	assert.Contains(t, err.Error(), "field checkpoint.redis.url")
	assert.NotContains(t, RedactURL(cfg.RedisURL), "hunter2")
}
