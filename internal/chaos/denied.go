package chaos

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/connect-kinesis/connect-kinesis/internal/faultproxy"
)

// deniedBacklog is how many records the denied shard holds, each of
// deniedRecordBytes: a backlog its reader would fetch if it could.
const (
	deniedBacklog     = 50
	deniedRecordBytes = 64 << 10
)

// createDenied creates the one-shard stream whose reads the proxy denies
// (Config.DeniedShard) and writes its backlog, straight to the emulator.
func (r *runner) createDenied(ctx context.Context) error {
	if _, err := r.kin.CreateStream(ctx, deniedStream, 1); err != nil {
		return fmt.Errorf("creating stream %s: %w", deniedStream, err)
	}
	pad := make([]byte, deniedRecordBytes)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := range deniedBacklog {
		if _, err := r.kc.PutRecords(ctx, &kinesis.PutRecordsInput{
			StreamName: aws.String(deniedStream),
			Records:    []types.PutRecordsRequestEntry{{PartitionKey: aws.String("d" + strconv.Itoa(i)), Data: pad}},
		}); err != nil {
			return fmt.Errorf("writing the backlog of %s: %w", deniedStream, err)
		}
	}
	return nil
}

// denyReads makes every GetShardIterator of the denied stream fail with
// AccessDeniedException, on top of the suite's usual faults on that call.
func denyReads(f *faultproxy.Front) {
	f.Set("GetShardIterator", faultproxy.Rule{ThrottleRate: 0.10, ErrorRate: 0.01, CutRate: 0.005, Hook: faultproxy.DenyStream(deniedStream)})
}
