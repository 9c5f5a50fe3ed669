package consumer

import (
	"fmt"
	"strings"
	"time"
)

// Start positions for shards without a checkpoint.
const (
	StartTrimHorizon = "trim_horizon"
	StartLatest      = "latest"
	StartAtTimestamp = "at_timestamp"
)

// StartOverride is where shards without a checkpoint begin after an
// operator reset, in place of the input's configured start_position.
type StartOverride struct {
	Mode      string // StartTrimHorizon, StartLatest or StartAtTimestamp
	Timestamp time.Time
}

// String is the stored form: "trim_horizon", "latest" or
// "at_timestamp=<RFC3339Nano>".
func (o StartOverride) String() string {
	if o.Mode == StartAtTimestamp {
		return StartAtTimestamp + "=" + o.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return o.Mode
}

// ParseStartOverride parses "trim_horizon", "latest" or
// "at_timestamp=<RFC3339>".
func ParseStartOverride(s string) (StartOverride, error) {
	switch {
	case s == StartTrimHorizon || s == StartLatest:
		return StartOverride{Mode: s}, nil
	case strings.HasPrefix(s, StartAtTimestamp+"="):
		ts, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(s, StartAtTimestamp+"="))
		if err != nil {
			return StartOverride{}, fmt.Errorf("parsing %q: the timestamp must be RFC3339, e.g. at_timestamp=2024-05-01T12:00:00Z", s)
		}
		return StartOverride{Mode: StartAtTimestamp, Timestamp: ts}, nil
	}
	return StartOverride{}, fmt.Errorf("parsing %q: want trim_horizon, latest or at_timestamp=<RFC3339>", s)
}

// LatestSkewMargin is how far before the group's start `latest` begins.
// The group's start is taken by the Redis server's clock, the records'
// arrival times by Kinesis': the margin absorbs a difference between the
// two clocks, so no record written after the group started is skipped. A
// group's very first read may therefore also deliver records written up to
// this long before it started.
const LatestSkewMargin = 5 * time.Second
