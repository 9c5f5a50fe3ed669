package consumertest

import (
	"net/http"
	"sync"

	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Stream is one scripted subscription: its events, then either an end
// (with err) or silence.
type Stream struct {
	Ch     chan types.SubscribeToShardEventStream
	EndErr error
	once   sync.Once
	Closed chan struct{}
}

func NewStream(events []types.SubscribeToShardEvent, end bool, err error) *Stream {
	s := &Stream{Ch: make(chan types.SubscribeToShardEventStream, len(events)), EndErr: err, Closed: make(chan struct{})}
	for _, e := range events {
		s.Ch <- &types.SubscribeToShardEventStreamMemberSubscribeToShardEvent{Value: e}
	}
	if end {
		s.once.Do(func() { close(s.Ch) })
	}
	return s
}

func APIErr(status int, err error) error {
	return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err}
}

// Events is the subscription's event channel.
func (s *Stream) Events() <-chan types.SubscribeToShardEventStream { return s.Ch }

// Err is the error the subscription ended with.
func (s *Stream) Err() error { return s.EndErr }

// Close ends the subscription.
func (s *Stream) Close() error {
	s.once.Do(func() { close(s.Ch) })
	select {
	case <-s.Closed:
	default:
		close(s.Closed)
	}
	return nil
}
