package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/source"
	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// useFanOut finds the stream consumer of this stream (registering it if
// the name is new), waits until it is ACTIVE and keeps it for the readers
// (efo_resolve.go). A consumer is never deregistered here: other instances
// of the group read through the same one. `connect-kinesis consumers
// deregister` removes it when the application is retired.
func (co *coordinator) useFanOut(ctx context.Context) error {
	efo := co.c.cfg.EnhancedFanOut
	if !efo.Enabled {
		return nil
	}
	if _, ok := co.c.api.(consumer.FanOutAPI); !ok {
		return errors.New("field enhanced_fan_out.enabled: this Kinesis client cannot subscribe to shards")
	}
	api := co.api.(consumer.FanOutAPI)
	streamARN := co.id
	if !kinesisx.IsARN(streamARN) {
		return fmt.Errorf("field enhanced_fan_out.enabled: stream %s has no ARN here, and enhanced fan-out needs one (this endpoint does not support it)", co.configured)
	}
	sc := source.NewStreamConsumer(api, streamARN, efo, co.c.cfg.Backoff, co.log)
	arn, err := sc.Resolve(ctx)
	if err != nil {
		return err
	}
	co.fanOut = sc
	co.log.Debugf("Reading with enhanced fan-out through stream consumer %s", arn)
	return nil
}
