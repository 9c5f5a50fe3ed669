package input

import (
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/streams"
	"github.com/connect-kinesis/connect-kinesis/plugins/checkpointer"
)

// A pattern that matches nothing (a typo such as `order-*` for
// `orders-*`, or the wrong account or region) leaves the input connected
// and reading nothing: Benthos' /ready answers 200, since the input is
// connected, and the only other sign is kinesis_input_streams 0. So the
// instance says it at WARN when the group's listing matches no stream, and
// again every noMatchWarnEvery while it stays so.

// noMatchWarnEvery bounds how often the warning repeats.
const noMatchWarnEvery = 10 * time.Minute

// noMatch remembers when nothing matching was last said.
type noMatch struct {
	// warned is when the warning was last logged; zero while streams match.
	warned time.Time
}

// note logs, at WARN, that the group's listing d matches no stream (once,
// then at most every noMatchWarnEvery while it stays so), and at INFO when
// streams match again after a warning.
func (n *noMatch) note(log *service.Logger, d checkpointer.Discovery, sc streams.Config, now time.Time) {
	patterns := strings.Join(sc.Rules.Patterns, ", ")
	if found := len(d.Listed()); found > 0 {
		if !n.warned.IsZero() {
			log.Infof("The streams listing now matches %d streams for %s", found, patterns)
		}
		n.warned = time.Time{}
		return
	}
	if !n.warned.IsZero() && now.Sub(n.warned) < noMatchWarnEvery {
		return
	}
	n.warned = now
	log.Warnf("No stream matches %s: the streams listing (every %v, in the account and region this input reaches) found none, so nothing is read from it until one appears; check the streams field for a typo, and the region, endpoint and credentials. The input counts as connected, so /ready answers 200 meanwhile; kinesis_input_streams shows 0. Said again every %v while nothing matches",
		patterns, sc.Interval, noMatchWarnEvery)
}
