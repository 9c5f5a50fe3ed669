package source

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// checkEnd asks GetRecords, at most once per checkEvery, whether the
// shard is closed and read to its end: for emulators that end a shard
// without the ChildShards event. Records it finds are left to the
// subscription; only an answer with none and no next iterator is the end.
func (s *subscriptionSource) checkEnd(ctx context.Context) (Batch, bool) {
	if time.Since(s.lastCheck) < s.checkEvery {
		return Batch{}, false
	}
	s.lastCheck = time.Now()
	callCtx, cancel := context.WithTimeout(ctx, getRecordsTimeout)
	defer cancel()
	it, err := s.api.GetShardIterator(callCtx, s.from.iteratorInput(s.stream, s.shard))
	if err != nil {
		s.log.Debugf("Checking for the shard's end failed; trying again later: %v", err)
		return Batch{}, false
	}
	gr := &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1)}
	_, gr.StreamARN = kinesisx.StreamRef(s.stream)
	out, err := s.api.GetRecords(callCtx, gr)
	if err != nil {
		s.log.Debugf("Checking for the shard's end failed; trying again later: %v", err)
		return Batch{}, false
	}
	if out.NextShardIterator != nil || len(out.Records) > 0 {
		return Batch{}, false
	}
	s.log.Debug("Shard is closed and read to its end; its subscription sent no ChildShards, so GetRecords told")
	return Batch{End: true, ChildShards: out.ChildShards}, true
}
