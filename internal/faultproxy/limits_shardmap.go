package faultproxy

import (
	"crypto/md5"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"time"
)

// shardMapTTL is how long a stream's shard map is trusted; a reshard is
// seen within it.
const shardMapTTL = time.Second

// putEntry is the part of a PutRecords entry that picks its shard.
type putEntry struct {
	Data            []byte
	PartitionKey    string
	ExplicitHashKey string
}

// hashKey is the entry's position in the 128-bit hash key space.
func (e putEntry) hashKey() *big.Int {
	if e.ExplicitHashKey != "" {
		if h, ok := new(big.Int).SetString(e.ExplicitHashKey, 10); ok {
			return h
		}
	}
	sum := md5.Sum([]byte(e.PartitionKey))
	return new(big.Int).SetBytes(sum[:])
}

// shardRange is an open shard's hash key range, inclusive.
type shardRange struct {
	id         string
	start, end *big.Int
}

type shardMapEntry struct {
	at time.Time
	// stream is the stream's name, for the shards' limits (shardKey).
	stream string
	ranges []shardRange
}

func (m *shardMapEntry) shardOf(h *big.Int) string {
	for _, r := range m.ranges {
		if h.Cmp(r.start) >= 0 && h.Cmp(r.end) <= 0 {
			return r.id
		}
	}
	return ""
}

// shardMap returns the open shards of the stream the request names, listed
// from the emulator at most once per shardMapTTL.
func (f *Front) shardMap(r *http.Request, req map[string]json.RawMessage) (*shardMapEntry, error) {
	var stream string
	if raw, ok := req["StreamARN"]; ok {
		_ = json.Unmarshal(raw, &stream)
	} else {
		_ = json.Unmarshal(req["StreamName"], &stream)
	}
	f.mu.Lock()
	m := f.maps[stream]
	f.mu.Unlock()
	if m != nil && f.now().Sub(m.at) < shardMapTTL {
		return m, nil
	}

	m = &shardMapEntry{at: f.now(), stream: stream}
	if _, ok := req["StreamARN"]; ok {
		m.stream = streamOf("", stream)
	}
	first := map[string]json.RawMessage{}
	for _, k := range []string{"StreamName", "StreamARN"} {
		if v, ok := req[k]; ok {
			first[k] = v
		}
	}
	page := first
	for {
		b, _ := json.Marshal(page)
		status, resp, err := f.call(r, "ListShards", b)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("listing shards of %s for the limits: status %d: %s", stream, status, resp)
		}
		var out struct {
			NextToken string
			Shards    []struct {
				ShardId             string
				HashKeyRange        struct{ StartingHashKey, EndingHashKey string }
				SequenceNumberRange struct {
					EndingSequenceNumber string
				}
			}
		}
		if err := json.Unmarshal(resp, &out); err != nil {
			return nil, fmt.Errorf("decoding the shards of %s: %w", stream, err)
		}
		for _, s := range out.Shards {
			if s.SequenceNumberRange.EndingSequenceNumber != "" {
				continue // closed: no longer written to
			}
			start, ok1 := new(big.Int).SetString(s.HashKeyRange.StartingHashKey, 10)
			end, ok2 := new(big.Int).SetString(s.HashKeyRange.EndingHashKey, 10)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("shard %s of %s has a malformed hash key range", s.ShardId, stream)
			}
			m.ranges = append(m.ranges, shardRange{id: s.ShardId, start: start, end: end})
		}
		if out.NextToken == "" {
			break
		}
		tok, _ := json.Marshal(out.NextToken)
		page = map[string]json.RawMessage{"NextToken": tok}
	}
	f.mu.Lock()
	f.maps[stream] = m
	f.mu.Unlock()
	return m, nil
}
