package input

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// Guards issue 60 item 3: a pattern that matched nothing looked healthy.
// The listing that matches no stream is said at WARN, naming the pattern
// and what /ready means then; it is said again only every 10 minutes
// while nothing matches, and once streams match an INFO line says so.
func TestAPatternMatchingNothingIsWarnedAboutEveryTenMinutes(t *testing.T) {
	var logs consumertest.SyncBuffer
	log := service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	sc := streams.Config{Rules: streams.Rules{Patterns: []string{"order-*"}}, Interval: 30 * time.Second}
	none := checkpointer.Discovery{ListedAt: time.Now()}
	var n noMatch
	at := time.Now()
	warnings := func() int { return strings.Count(logs.String(), "level=WARN") }

	n.note(log, none, sc, at)
	assert.Equal(t, 1, warnings())
	assert.Contains(t, logs.String(), "No stream matches order-*: the streams listing (every 30s")
	assert.Contains(t, logs.String(), "/ready answers 200 meanwhile")
	n.note(log, none, sc, at.Add(30*time.Second))
	n.note(log, none, sc, at.Add(9*time.Minute))
	assert.Equal(t, 1, warnings(), "at most once per 10 minutes")
	n.note(log, none, sc, at.Add(10*time.Minute))
	assert.Equal(t, 2, warnings(), "again while it stays so")

	found := checkpointer.Discovery{ListedAt: time.Now(), Streams: []checkpointer.DiscoveredStream{{Identity: streams.Identity{Name: "order-1"}}}}
	n.note(log, found, sc, at.Add(11*time.Minute))
	assert.Contains(t, logs.String(), "The streams listing now matches 1 streams for order-*")
	n.note(log, none, sc, at.Add(12*time.Minute))
	assert.Equal(t, 3, warnings(), "a pattern that stops matching is said at once")
}
