package source

import (
	"context"
	"errors"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// Why a subscription ends before the reader is done with it: the reader
// left it unread past pausedLimit (cancelPaused), its five minutes ran
// out or its stream failed (ended), or another subscription holds the
// shard (heldElsewhere). Each time the next read subscribes again after
// the last record returned.

// resume stops the pause timer: the subscription is read again.
func (s *subscriptionSource) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pause != nil {
		s.pause.Stop()
	}
	if s.endedByPause {
		s.endedByPause = false
		s.log.Debug("Subscription was cancelled while the pipeline had no room; subscribing again after the last delivered record")
	}
}

// cancelPaused ends a subscription the reader left unread too long.
func (s *subscriptionSource) cancelPaused() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.endedByPause = true
		s.closeLocked()
	}
}

// ended handles a subscription whose events stopped: the session ran its
// five minutes (no error), or the stream failed.
func (s *subscriptionSource) ended() {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return // cancelled while paused
	}
	err := cur.Err()
	s.renew()
	if err != nil {
		// A subscription that failed holds no room while another one is
		// opened; one that ran its five minutes keeps it.
		s.room.GiveBack()
	}
	if kinesisx.ErrorCode(err) != kinesisx.CodeResourceInUse {
		s.inUseSince = time.Time{}
	}
	if !kinesisx.IsNotFound(err) {
		s.goneSince = time.Time{}
	}
	switch {
	case kinesisx.ErrorCode(err) == kinesisx.CodeResourceInUse:
		s.heldElsewhere(err)
	case kinesisx.IsNotFound(err):
		s.notFound(err)
	case err == nil:
		s.log.Debug("Subscription ended; subscribing again after the last delivered record")
	case kinesisx.Retryable(err) || errors.Is(err, context.Canceled):
		s.log.Debugf("Subscription broke; subscribing again after the last delivered record: %v", err)
	default:
		s.log.Warnf("Subscription failed; subscribing again after the last delivered record: %v", err)
	}
}

// heldElsewhere handles a subscription refused because another one of the
// same consumer holds the shard: most often the previous owner's, which
// Kinesis ends once it notices that connection gone, and at the latest when
// its five minutes are over. Subscribing goes on once a second; a warning
// comes only when the refusals last, and then at the pace of warnPacer.
func (s *subscriptionSource) heldElsewhere(err error) {
	if s.inUseSince.IsZero() {
		s.inUseSince = time.Now()
		s.inUse.reset()
	}
	held := time.Since(s.inUseSince)
	if !s.inUse.due(true, held) {
		s.log.Debugf("Another subscription holds the shard; subscribing again after the last delivered record: %v", err)
		return
	}
	s.log.Warnf("Another subscription of this consumer has held the shard for %v (a previous owner's, until Kinesis notices its connection gone or its five minutes end); subscribing again after the last delivered record: %v",
		held.Round(time.Second), err)
}

// notFound handles a subscription whose stream ended with
// ResourceNotFound: the stream consumer was deregistered, or the shard or
// its stream is gone. The next subscribe tells which and acts (registers
// the consumer again, or hands the reader ErrShardNotFound to judge), so
// one such ending is routine and logged at DEBUG. Only endings that keep
// coming while subscribing succeeds are warned of, at the pace of
// warnPacer.
func (s *subscriptionSource) notFound(err error) {
	if s.goneSince.IsZero() {
		s.goneSince = time.Now()
		s.gone.reset()
	}
	lasting := time.Since(s.goneSince)
	if !s.gone.due(true, lasting) {
		s.log.Debugf("Subscription ended: Kinesis no longer finds the stream consumer, the shard or its stream; subscribing again after the last delivered record tells which: %v", err)
		return
	}
	s.log.Warnf("Subscriptions of the shard keep ending with ResourceNotFound for %v, although subscribing succeeds; subscribing again after the last delivered record: %v",
		lasting.Round(time.Second), err)
}
