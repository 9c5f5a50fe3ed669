package awsconf

import (
	"fmt"

	"github.com/aws/smithy-go/logging"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// sdkLogger hands the AWS SDK's log lines (aws.Config.Logger) to the Benthos
// logger, so they come out in its format and at its level: the SDK's own
// logger writes "SDK 2026/12/02 ... WARN ..." to stderr, past
// `logger.format: json`, and breaks a JSON log.
type sdkLogger struct{ log *service.Logger }

// Logf logs at the SDK's classification: Warn at WARN, anything else
// (Debug, the SDK's only other) at DEBUG.
func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if c == logging.Warn {
		l.log.Warn(msg)
		return
	}
	l.log.Debug(msg)
}
