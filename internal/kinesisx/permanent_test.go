package kinesisx

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
)

// redisReply is a Redis error reply, as go-redis' errors mark them.
type redisReply string

func (r redisReply) Error() string { return string(r) }
func (redisReply) RedisError()     {}

func TestPermanent(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"marked":             {MarkPermanent(errors.New("field region: no region")), true},
		"WRONGPASS":          {fmt.Errorf("reaching Redis: %w", redisReply("WRONGPASS invalid username-password pair")), true},
		"NOAUTH":             {redisReply("NOAUTH Authentication required."), true},
		"NOPERM":             {redisReply("NOPERM User x has no permissions to run the 'ping' command"), true},
		"Redis loading":      {redisReply("LOADING Redis is loading the dataset in memory"), false},
		"stream missing":     {&smithy.GenericAPIError{Code: CodeResourceNotFound, Message: "Stream orders not found"}, true},
		"throttled":          {&smithy.GenericAPIError{Code: CodeProvisionedThroughputExceeded}, false},
		"connection refused": {errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
	} {
		assert.Equal(t, tc.want, Permanent(tc.err), name)
	}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second},
		[]time.Duration{ConnectWait(1), ConnectWait(2), ConnectWait(3), ConnectWait(4), ConnectWait(5), ConnectWait(100)})
}
