package consumertest

import (
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Consumers is the stream-consumer half of a fake fan-out API: the
// consumers of stream s by ARN, all ACTIVE; registering adds one named
// after its ARN's count.
type Consumers struct {
	Mu         sync.Mutex
	ByARN      map[string]string // ARN -> name
	Registered int
	// NoStream makes registering fail as for a deleted stream.
	NoStream bool
}

func NewConsumers(arns ...string) *Consumers {
	f := &Consumers{ByARN: map[string]string{}}
	for _, a := range arns {
		name, _, _ := strings.Cut(a[strings.LastIndex(a, "/")+1:], ":")
		f.ByARN[a] = name
	}
	return f
}

func NotFound(what string) error {
	return APIErr(400, &types.ResourceNotFoundException{Message: aws.String(what + " not found")})
}

// StreamARN is the ARN of the fakes' stream "s"; ConsumerARN a stream
// consumer of it.
const (
	StreamARN   = FakeARNPrefix + "s"
	ConsumerARN = StreamARN + "/consumer/c:1"
)
