package producer

import (
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// onRetry counts the records Kinesis refused in the attempt about to be
// retried, by error code, and logs them at warn, rate-limited, and each
// retry at debug with its error, so that what a retry may have written
// twice (a request whose answer was lost) can be traced.
func (p *Producer) onRetry(e failsafe.ExecutionEvent[putResult]) {
	r := e.LastResult()
	for code, n := range r.codes {
		p.mRetries.Incr(int64(n), p.streamLabel(), code)
	}
	p.log.With("stream", p.streamID(), "records", r.failed, "attempt", e.Attempts()).
		Debugf("Retrying records: %s", r.sample)
	p.warn.Warnf(p.streamID(), r.failed, r.sample)
}

// rateLimitedLogger logs retries at warn at most once per interval, with a
// count of those it held back, so a throttled stream does not flood the log.
type rateLimitedLogger struct {
	log        *service.Logger
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *rateLimitedLogger) Warnf(stream string, records int, sample string) {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < l.every {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.log.With("stream", stream, "records", records, "similar_retries_not_logged", suppressed).
		Warnf("Retrying records Kinesis refused: %s", sample)
}
