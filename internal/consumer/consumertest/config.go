package consumertest

import (
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Config is a consumer configuration for tests: one stream "s", short
// periods, a small limit.
func Config() consumer.Config {
	return consumer.Config{
		Streams:           []string{"s"},
		StartPosition:     consumer.StartTrimHorizon,
		ShardMaxInFlight:  1,
		Limit:             10,
		PollInterval:      kinesisx.MinPollInterval,
		IdlePollInterval:  kinesisx.MinPollInterval,
		DiscoveryInterval: 100 * time.Millisecond,
		CommitPeriod:      50 * time.Millisecond,
		LeasePeriod:       600 * time.Millisecond,
		RebalancePeriod:   50 * time.Millisecond,
		HandoffTimeout:    time.Second,
		Backoff:           kinesisx.Backoff{InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxElapsedTime: time.Second},
	}
}
