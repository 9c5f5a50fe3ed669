package kinesissim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// epochTime is a timestamp as awsJson1_1 sends it: seconds since the epoch,
// a JSON number with a fraction.
type epochTime struct {
	t   time.Time
	set bool
}

func (e *epochTime) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("timestamp %s is not a number of seconds", b)
	}
	sec := int64(f)
	e.t, e.set = time.Unix(sec, int64((f-float64(sec))*1e9)), true
	return nil
}

// appendEpoch appends t as awsJson1_1 writes a timestamp, in seconds with
// milliseconds.
func appendEpoch(dst []byte, ms int64) []byte {
	dst = strconv.AppendInt(dst, ms/1000, 10)
	dst = append(dst, '.')
	frac := ms % 1000
	if frac < 100 {
		dst = append(dst, '0')
	}
	if frac < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, frac, 10)
}

type streamRef struct {
	StreamName string `json:"StreamName"`
	StreamARN  string `json:"StreamARN"`
}

type shardFilter struct {
	Type      string    `json:"Type"`
	ShardID   string    `json:"ShardId"`
	Timestamp epochTime `json:"Timestamp"`
}

// Shard listings: MaxResults may be 1 to 10,000, but a ListShards page holds
// at most 1,000 shards whatever it says, as the service's API reference
// states (a larger page would make a listing take fewer calls than the
// service's); its NextToken lasts 300 s, as the service's.
const (
	listShardsDefault = 1000
	listShardsMax     = 10000
	nextTokenLife     = 300 * time.Second
)

func (s *Server) listShards(body []byte, a *answer) error {
	var in struct {
		streamRef
		NextToken               string       `json:"NextToken"`
		MaxResults              *int         `json:"MaxResults"`
		ExclusiveStartShardID   string       `json:"ExclusiveStartShardId"`
		ShardFilter             *shardFilter `json:"ShardFilter"`
		StreamCreationTimestamp epochTime    `json:"StreamCreationTimestamp"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	limit := listShardsDefault
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > listShardsMax {
			return apiError{code: codeInvalidArgument, msg: fmt.Sprintf("MaxResults %d is not in [1, %d].", *in.MaxResults, listShardsMax)}
		}
		limit = min(*in.MaxResults, listShardsDefault)
	}
	var (
		st    *stream
		start int
	)
	if in.NextToken != "" {
		if in.StreamName != "" || in.StreamARN != "" || in.ExclusiveStartShardID != "" || in.ShardFilter != nil || in.StreamCreationTimestamp.set {
			return apiError{code: codeInvalidArgument, msg: "NextToken cannot be given with StreamName, StreamARN, ExclusiveStartShardId, ShardFilter or StreamCreationTimestamp."}
		}
		gen, idx, err := parseToken(in.NextToken)
		if err != nil {
			return err
		}
		var ok bool
		if st, ok = s.streams.Load().byGen[gen]; !ok {
			return apiError{code: codeResourceNotFound, msg: "The stream of this NextToken no longer exists."}
		}
		start = int(min(idx, uint64(len(st.shards))))
	} else {
		var err error
		if st, err = s.lookup(in.StreamName, in.StreamARN); err != nil {
			return err
		}
		if in.ExclusiveStartShardID != "" {
			start = st.indexAfter(in.ExclusiveStartShardID)
		}
		if f := in.ShardFilter; f != nil {
			// Shards never close here: every filter but AFTER_SHARD_ID
			// (open at or after a time, or at the trim horizon) selects
			// every shard.
			switch f.Type {
			case "AFTER_SHARD_ID":
				if f.ShardID == "" {
					return apiError{code: codeInvalidArgument, msg: "ShardFilter AFTER_SHARD_ID needs a ShardId."}
				}
				start = max(start, st.indexAfter(f.ShardID))
			case "AT_TIMESTAMP", "FROM_TIMESTAMP":
				if !f.Timestamp.set {
					return apiError{code: codeInvalidArgument, msg: "ShardFilter " + f.Type + " needs a Timestamp."}
				}
			case "AT_TRIM_HORIZON", "FROM_TRIM_HORIZON", "AT_LATEST":
			default:
				return apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value '%s' at 'shardFilter.type' failed to satisfy constraint: Member must satisfy enum value set: [AFTER_SHARD_ID, AT_TRIM_HORIZON, FROM_TRIM_HORIZON, AT_LATEST, AT_TIMESTAMP, FROM_TIMESTAMP]", f.Type)}
			}
		}
	}
	end := min(start+limit, len(st.shards))
	b := make([]byte, 0, 64+(end-start)*220)
	b = append(b, `{"Shards":`...)
	b = st.appendShards(b, start, end)
	if end < len(st.shards) {
		b = append(b, `,"NextToken":"`...)
		b = append(b, makeToken(st.gen, uint64(end))...)
		b = append(b, '"')
	}
	b = append(b, '}')
	return a.raw(b)
}

// indexAfter returns the index of the first shard whose ID sorts after id
// (shard IDs are of one width, so their order as strings is their order).
func (st *stream) indexAfter(id string) int {
	return sort.Search(len(st.shards), func(i int) bool { return shardID(i) > id })
}

// appendShards writes shards [start, end) as a JSON array.
func (st *stream) appendShards(b []byte, start, end int) []byte {
	b = append(b, '[')
	startSeq := formatSeq(st.startSeq)
	for i := start; i < end; i++ {
		if i > start {
			b = append(b, ',')
		}
		lo, hi := st.hashRange(i)
		b = append(b, `{"ShardId":"`...)
		b = append(b, shardID(i)...)
		b = append(b, `","HashKeyRange":{"StartingHashKey":"`...)
		b = append(b, lo...)
		b = append(b, `","EndingHashKey":"`...)
		b = append(b, hi...)
		b = append(b, `"},"SequenceNumberRange":{"StartingSequenceNumber":"`...)
		b = append(b, startSeq...)
		b = append(b, `"}}`...)
	}
	return append(b, ']')
}

// makeToken makes a NextToken naming a stream's generation, where the
// next page starts, and when it was issued.
func makeToken(gen, next uint64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d:%d", gen, next, time.Now().UnixMilli()))
}

func parseToken(tok string) (gen, next uint64, err error) {
	bad := apiError{code: codeInvalidArgument, msg: "NextToken " + tok + " is not one this server issued."}
	raw, derr := base64.RawURLEncoding.DecodeString(tok)
	if derr != nil {
		return 0, 0, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 3 {
		return 0, 0, bad
	}
	var issued int64
	gen, e1 := strconv.ParseUint(parts[0], 10, 64)
	next, e2 := strconv.ParseUint(parts[1], 10, 64)
	issued, e3 := strconv.ParseInt(parts[2], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil {
		return 0, 0, bad
	}
	if time.Since(time.UnixMilli(issued)) > nextTokenLife {
		return 0, 0, apiError{code: codeExpiredNextToken, msg: "The NextToken has expired (they last 300 s)."}
	}
	return gen, next, nil
}

// streamJSON holds a stream's fields common to its descriptions.
type streamJSON struct {
	StreamName              string            `json:"StreamName"`
	StreamARN               string            `json:"StreamARN"`
	StreamStatus            string            `json:"StreamStatus"`
	StreamModeDetails       map[string]string `json:"StreamModeDetails"`
	StreamCreationTimestamp json.RawMessage   `json:"StreamCreationTimestamp"`
}

func (st *stream) summaryFields() streamJSON {
	return streamJSON{
		StreamName: st.name, StreamARN: st.arn, StreamStatus: "ACTIVE",
		StreamModeDetails:       map[string]string{"StreamMode": st.mode},
		StreamCreationTimestamp: appendEpoch(nil, st.created.UnixMilli()),
	}
}

const retentionHours = 24

func (s *Server) describeStreamSummary(body []byte, a *answer) error {
	var in streamRef
	if err := decode(body, &in); err != nil {
		return err
	}
	st, err := s.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return err
	}
	type summary struct {
		streamJSON
		RetentionPeriodHours int              `json:"RetentionPeriodHours"`
		EncryptionType       string           `json:"EncryptionType"`
		EnhancedMonitoring   []map[string]any `json:"EnhancedMonitoring"`
		OpenShardCount       int              `json:"OpenShardCount"`
		ConsumerCount        int              `json:"ConsumerCount"`
	}
	return a.json(map[string]summary{"StreamDescriptionSummary": {
		streamJSON: st.summaryFields(), RetentionPeriodHours: retentionHours, EncryptionType: "NONE",
		EnhancedMonitoring: []map[string]any{{"ShardLevelMetrics": []string{}}},
		OpenShardCount:     len(st.shards),
	}})
}

func (s *Server) describeStream(body []byte, a *answer) error {
	var in struct {
		streamRef
		Limit                 *int   `json:"Limit"`
		ExclusiveStartShardID string `json:"ExclusiveStartShardId"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	st, err := s.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return err
	}
	limit := 100
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > listShardsMax {
			return apiError{code: codeInvalidArgument, msg: fmt.Sprintf("Limit %d is not in [1, %d].", *in.Limit, listShardsMax)}
		}
		limit = *in.Limit
	}
	start := 0
	if in.ExclusiveStartShardID != "" {
		start = st.indexAfter(in.ExclusiveStartShardID)
	}
	end := min(start+limit, len(st.shards))
	head, err := json.Marshal(struct {
		streamJSON
		RetentionPeriodHours int              `json:"RetentionPeriodHours"`
		EncryptionType       string           `json:"EncryptionType"`
		EnhancedMonitoring   []map[string]any `json:"EnhancedMonitoring"`
		HasMoreShards        bool             `json:"HasMoreShards"`
	}{st.summaryFields(), retentionHours, "NONE", []map[string]any{{"ShardLevelMetrics": []string{}}}, end < len(st.shards)})
	if err != nil {
		return err
	}
	b := append([]byte(`{"StreamDescription":`), head[:len(head)-1]...)
	b = append(b, `,"Shards":`...)
	b = st.appendShards(b, start, end)
	return a.raw(append(b, "}}"...))
}

func (s *Server) listStreams(body []byte, a *answer) error {
	var in struct {
		Limit                    *int   `json:"Limit"`
		ExclusiveStartStreamName string `json:"ExclusiveStartStreamName"`
		NextToken                string `json:"NextToken"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	limit := 100
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > 10000 {
			return apiError{code: codeInvalidArgument, msg: fmt.Sprintf("Limit %d is not in [1, 10000].", *in.Limit)}
		}
		limit = *in.Limit
	}
	after := in.ExclusiveStartStreamName
	if in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		name, issued, ok := strings.Cut(string(raw), "\x00")
		ms, perr := strconv.ParseInt(issued, 10, 64)
		if err != nil || !ok || perr != nil {
			return apiError{code: codeInvalidArgument, msg: "NextToken " + in.NextToken + " is not one this server issued."}
		}
		if time.Since(time.UnixMilli(ms)) > nextTokenLife {
			return apiError{code: codeExpiredNextToken, msg: "The NextToken has expired (they last 300 s)."}
		}
		after = name
	}
	cat := s.streams.Load()
	start := sort.Search(len(cat.names), func(i int) bool { return cat.names[i] > after })
	end := min(start+limit, len(cat.names))
	names := cat.names[start:end]
	out := struct {
		StreamNames     []string     `json:"StreamNames"`
		HasMoreStreams  bool         `json:"HasMoreStreams"`
		NextToken       string       `json:"NextToken,omitempty"`
		StreamSummaries []streamJSON `json:"StreamSummaries"`
	}{StreamNames: append([]string{}, names...), HasMoreStreams: end < len(cat.names), StreamSummaries: make([]streamJSON, 0, len(names))}
	for _, n := range names {
		out.StreamSummaries = append(out.StreamSummaries, cat.byName[n].summaryFields())
	}
	if out.HasMoreStreams {
		out.NextToken = base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s\x00%d", names[len(names)-1], time.Now().UnixMilli()))
	}
	return a.json(out)
}

func (s *Server) listTagsForStream(body []byte, a *answer) error {
	var in struct {
		streamRef
		ExclusiveStartTagKey string `json:"ExclusiveStartTagKey"`
		Limit                *int   `json:"Limit"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	st, err := s.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return err
	}
	limit := 50
	if in.Limit != nil && *in.Limit >= 1 && *in.Limit <= 50 {
		limit = *in.Limit
	}
	keys := make([]string, 0, len(st.tags))
	for k := range st.tags {
		if k > in.ExclusiveStartTagKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	type tag struct {
		Key   string `json:"Key"`
		Value string `json:"Value"`
	}
	out := struct {
		Tags        []tag `json:"Tags"`
		HasMoreTags bool  `json:"HasMoreTags"`
	}{Tags: []tag{}, HasMoreTags: len(keys) > limit}
	for _, k := range keys[:min(limit, len(keys))] {
		out.Tags = append(out.Tags, tag{k, st.tags[k]})
	}
	return a.json(out)
}

// onDemandShards is the shard count of an on-demand stream (and of a
// CreateStream without ShardCount), as the service starts one.
const onDemandShards = 4

func (s *Server) createStreamOp(body []byte, a *answer) error {
	var in struct {
		StreamName        string            `json:"StreamName"`
		ShardCount        *int              `json:"ShardCount"`
		StreamModeDetails map[string]string `json:"StreamModeDetails"`
		Tags              map[string]string `json:"Tags"`
	}
	if err := decode(body, &in); err != nil {
		return err
	}
	mode := "PROVISIONED"
	if m := in.StreamModeDetails["StreamMode"]; m != "" {
		mode = m
	}
	shards := onDemandShards
	switch {
	case in.ShardCount != nil:
		shards = *in.ShardCount
	case mode == "PROVISIONED" && in.StreamModeDetails != nil:
		return apiError{code: codeInvalidArgument, msg: "A PROVISIONED stream needs a ShardCount."}
	}
	if _, err := s.create(in.StreamName, shards, mode, in.Tags); err != nil {
		return err
	}
	return a.raw([]byte("{}"))
}

func (s *Server) deleteStream(body []byte, a *answer) error {
	var in streamRef
	if err := decode(body, &in); err != nil {
		return err
	}
	st, err := s.lookup(in.StreamName, in.StreamARN)
	if err != nil {
		return err
	}
	s.remove(st)
	return a.raw([]byte("{}"))
}
