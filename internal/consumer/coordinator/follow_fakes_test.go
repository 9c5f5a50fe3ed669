package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer"
	"github.com/connect-kinesis/connect-kinesis/internal/consumer/consumertest"
)

// streamsAPI routes calls to one fake Kinesis per stream name, as an
// account of several streams. Deleting a stream makes every call about it
// answer ResourceNotFound; creating it again under its name gives it a new
// generation, and the iterators of the deleted one are refused.
type streamsAPI struct {
	mu  sync.Mutex
	by  map[string]*consumertest.Kinesis
	gen map[string]int
}

func newStreamsAPI() *streamsAPI {
	return &streamsAPI{by: map[string]*consumertest.Kinesis{}, gen: map[string]int{}}
}

// create adds (or creates again) a stream of n shards of records each,
// created at created.
func (a *streamsAPI) create(name string, shards, records int, created time.Time) *consumertest.Kinesis {
	k := consumertest.NewKinesis()
	k.Created = created
	for i := range shards {
		k.Add(fmt.Sprintf("shardId-%012d", i), &consumertest.KinesisShard{Records: records})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.by[name] = k
	a.gen[name]++
	return k
}

func (a *streamsAPI) delete(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.by, name)
}

// found is the Found of a stream as a listing gives it.
func (a *streamsAPI) found(name string, start string) Found {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Found{Name: name, Key: consumertest.FakeARNPrefix + name, Created: a.by[name].Created, Start: start}
}

func (a *streamsAPI) route(name, arn *string) (*consumertest.Kinesis, string, int, error) {
	n := aws.ToString(name)
	if arn != nil {
		n = strings.TrimPrefix(aws.ToString(arn), consumertest.FakeARNPrefix)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.by[n]
	if k == nil {
		return nil, n, 0, consumertest.NotFound("Stream " + n)
	}
	return k, n, a.gen[n], nil
}

func (a *streamsAPI) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	k, _, _, err := a.route(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	return k.DescribeStreamSummary(ctx, in)
}

// ListShards pages carry the stream's name in their NextToken.
func (a *streamsAPI) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	req := *in
	name, arn := in.StreamName, in.StreamARN
	if in.NextToken != nil {
		n, tok, _ := strings.Cut(aws.ToString(in.NextToken), "|")
		name, arn, req.NextToken = aws.String(n), nil, aws.String(tok)
	}
	k, n, _, err := a.route(name, arn)
	if err != nil {
		return nil, err
	}
	out, err := k.ListShards(ctx, &req)
	if err == nil && out.NextToken != nil {
		out.NextToken = aws.String(n + "|" + aws.ToString(out.NextToken))
	}
	return out, err
}

// GetShardIterator prefixes the fake's iterator with "<name>|<generation>|".
func (a *streamsAPI) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	k, n, gen, err := a.route(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	out, err := k.GetShardIterator(ctx, in)
	if err != nil {
		return nil, err
	}
	out.ShardIterator = aws.String(n + "|" + strconv.Itoa(gen) + "|" + aws.ToString(out.ShardIterator))
	return out, nil
}

func (a *streamsAPI) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	parts := strings.SplitN(aws.ToString(in.ShardIterator), "|", 3)
	k, n, gen, err := a.route(aws.String(parts[0]), nil)
	if err != nil {
		return nil, err
	}
	if strconv.Itoa(gen) != parts[1] {
		return nil, consumertest.NotFound("Stream " + n + " (deleted)")
	}
	req := *in
	req.ShardIterator = aws.String(parts[2])
	out, err := k.GetRecords(ctx, &req)
	if err == nil && out.NextShardIterator != nil {
		out.NextShardIterator = aws.String(parts[0] + "|" + parts[1] + "|" + aws.ToString(out.NextShardIterator))
	}
	return out, err
}

// storesByStream gives each stream its own fake store.
type storesByStream struct {
	mu sync.Mutex
	by map[string]*consumertest.Store
}

func (s *storesByStream) get(id string) consumer.Store { return s.store(id) }

func (s *storesByStream) store(id string) *consumertest.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*consumertest.Store{}
	}
	if s.by[id] == nil {
		s.by[id] = consumertest.NewStore(time.Second)
	}
	return s.by[id]
}

// streamLog records "<stream>|<data>" of every acked record, by consumer.
type streamLog struct {
	mu   sync.Mutex
	seen map[string]int
	all  []string
}

func (l *streamLog) add(b *consumer.Batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]int{}
	}
	for _, r := range b.Records {
		k := b.Stream + "|" + string(r.Data)
		l.seen[k]++
		l.all = append(l.all, k)
	}
}

// count is how many records of stream were acked, and how many of them
// more than once.
func (l *streamLog) count(stream string) (n, dup int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range l.seen {
		if strings.HasPrefix(k, stream+"|") {
			n += c
			if c > 1 {
				dup++
			}
		}
	}
	return n, dup
}

func (l *streamLog) times(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[key]
}

// ackInto acks every batch of c as it arrives until ctx ends.
func ackInto(ctx context.Context, c *Consumer, l *streamLog) {
	for {
		select {
		case b := <-c.Batches():
			l.add(b)
			b.Ack(nil)
		case <-ctx.Done():
			return
		}
	}
}

// startFollower starts a consumer of instance id that reads no named
// stream, acks every batch into got until ctx ends, and follows found;
// it is closed when the test ends.
func startFollower(ctx context.Context, t *testing.T, api consumer.KinesisAPI, stores *storesByStream, id string, got *streamLog, found []Found) *Consumer {
	t.Helper()
	return startFollowerWith(ctx, t, api, stores, id, got, found, nil)
}

// startFollowerWith is startFollower with the configuration changed by
// edit first.
func startFollowerWith(ctx context.Context, t *testing.T, api consumer.KinesisAPI, stores *storesByStream, id string, got *streamLog, found []Found, edit func(*consumer.Config)) *Consumer {
	t.Helper()
	cfg := testConfig()
	cfg.Streams, cfg.FollowStreams, cfg.InstanceID = nil, true, id
	if edit != nil {
		edit(&cfg)
	}
	c := startAcking(ctx, t, cfg, api, stores, nil, got)
	require.NoError(t, c.Follow(ctx, found))
	return c
}

// startAcking starts a consumer of cfg that acks every batch into got
// until ctx ends, logging into logs when it is not nil (with test
// metrics then); it is closed when the test ends.
func startAcking(ctx context.Context, t *testing.T, cfg consumer.Config, api consumer.KinesisAPI, stores *storesByStream, logs *consumertest.SyncBuffer, got *streamLog) *Consumer {
	t.Helper()
	var log *service.Logger
	var metrics *service.Metrics
	if logs != nil {
		log = service.NewLoggerFromSlog(slog.New(slog.NewTextHandler(logs, nil)))
		metrics = consumertest.Metrics(t)
	}
	c, err := New(cfg, api, stores.get, log, metrics)
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	go ackInto(ctx, c, got)
	return c
}
