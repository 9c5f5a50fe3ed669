package checkpointer

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// TestRedactURLEveryForm guards against a credential in any place a URL of
// go-redis' parsers can carry one (userinfo for every form; the `password`
// query parameter of ParseFailoverURL, and `sentinel_password` which some
// clients use) reaching a log or an error.
func TestRedactURLEveryForm(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		secrets   []string
		keep      []string
	}{
		{
			name:    "redis userinfo",
			url:     "redis://user:s3cr3t-a@localhost:6379/2?dial_timeout=3s",
			secrets: []string{"s3cr3t-a"},
			keep:    []string{"user", "localhost:6379/2", "dial_timeout=3s"},
		},
		{
			name:    "rediss password only",
			url:     "rediss://:s3cr3t-b@redis.example:6380",
			secrets: []string{"s3cr3t-b"},
			keep:    []string{"rediss://", "redis.example:6380"},
		},
		{
			name:    "unix socket with userinfo and query",
			url:     "unix://user:s3cr3t-c@/var/run/redis.sock?db=3&password=s3cr3t-d",
			secrets: []string{"s3cr3t-c", "s3cr3t-d"},
			keep:    []string{"/var/run/redis.sock", "db=3"},
		},
		{
			name:    "cluster with addr parameters",
			url:     "redis://user:s3cr3t-e@n1:7000?addr=n2:7001&addr=n3:7002",
			secrets: []string{"s3cr3t-e"},
			keep:    []string{"n1:7000", "addr=n2:7001", "addr=n3:7002"},
		},
		{
			name:    "sentinel with master credentials in the query",
			url:     "redis://sentuser:s3cr3t-f@s1:26379?addr=s2:26379&master_name=mymaster&username=app&password=s3cr3t-g&sentinel_password=s3cr3t-h",
			secrets: []string{"s3cr3t-f", "s3cr3t-g", "s3cr3t-h"},
			keep:    []string{"s1:26379", "master_name=mymaster", "username=app"},
		},
		{
			name:    "query names in any case",
			url:     "redis://s1:26379?PASSWORD=s3cr3t-i&Sentinel_Password=s3cr3t-j",
			secrets: []string{"s3cr3t-i", "s3cr3t-j"},
			keep:    []string{"s1:26379"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RedactURL(tc.url)
			for _, s := range tc.secrets {
				assert.NotContains(t, got, s)
			}
			for _, k := range tc.keep {
				assert.Contains(t, got, k, "a redacted URL still says where it points")
			}
			// An error quoting the URL, or only the secret, is cleaned too.
			msg := redactErr(errors.New("dialing "+tc.url+": "+tc.secrets[len(tc.secrets)-1]), tc.url)
			for _, s := range tc.secrets {
				assert.NotContains(t, msg, s)
			}
		})
	}
	assert.Equal(t, "<unparsable redis url>", RedactURL("redis://:pw@[::1"))
}

// TestRedisURLQueryPasswordNeverInErrors: go-redis' parse errors quote
// options; a Sentinel URL's query password must not reach them.
func TestRedisURLQueryPasswordNeverInErrors(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RedisURL, cfg.RedisKind, cfg.RedisMaster, cfg.Group = "redis://s1:26379?password=hunter3&bogus=1", KindFailover, "m", "g"
	_, err := NewRedisClient(cfg)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter3")
	assert.Contains(t, err.Error(), "field checkpoint.redis.url")
}

// TestIntegrationConnectLogHidesQueryPassword connects through Sentinel with
// the master's password given as `?password=` (go-redis' Sentinel form) and
// checks that the connect log line, printed at DEBUG, says where it
// connected without the password.
func TestIntegrationConnectLogHidesQueryPassword(t *testing.T) {
	t.Parallel()
	const secret = "q-secret-77"
	master := testenv.NewRedis(t, testenv.RedisOptions{Password: secret})
	sentinel := testenv.NewSentinel(t, master)

	var logs bytes.Buffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	cfg := DefaultConfig()
	cfg.RedisURL = "redis://" + sentinel.Addr + "?password=" + secret
	cfg.RedisKind, cfg.RedisMaster, cfg.Group = KindFailover, testenv.SentinelMaster, "redact"
	c, err := New(t.Context(), cfg, log, nil)
	require.NoError(t, err, "the query password reaches the master")
	t.Cleanup(func() { _ = c.Close() })
	// The write proves the client is authenticated against the master.
	s := c.Stream("orders")
	_, err = s.Join(t.Context())
	require.NoError(t, err)

	out := logs.String()
	require.Contains(t, out, "Connected to the checkpoint store")
	assert.Contains(t, out, sentinel.Addr)
	assert.NotContains(t, out, secret)
}
