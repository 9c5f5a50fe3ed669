package faultproxy

import (
	"encoding/json"
	"net/http"
)

// CodeResourceNotFound is Kinesis' answer for a shard it does not know.
const CodeResourceNotFound = "ResourceNotFoundException"

// HideShards makes the named shards look trimmed past the retention
// period, which the emulators never do: ListShards answers leave them out,
// and GetShardIterator on one answers 400 ResourceNotFoundException
// without reaching the emulator. Hidden shards stay hidden until
// ShowShards; the set is independent of the rules (Clear keeps it).
func (p *Proxy) HideShards(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hidden == nil {
		p.hidden = map[string]bool{}
	}
	for _, id := range ids {
		p.hidden[id] = true
	}
}

// ShowShards lists the named shards again (none: every hidden shard).
func (p *Proxy) ShowShards(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(ids) == 0 {
		clear(p.hidden)
	}
	for _, id := range ids {
		delete(p.hidden, id)
	}
}

func (p *Proxy) isHidden(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hidden[id]
}

func (p *Proxy) hiding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hidden) > 0
}

// refuseHidden answers a GetShardIterator of a hidden shard as Kinesis
// answers one of a trimmed shard; true when it answered.
func (p *Proxy) refuseHidden(w http.ResponseWriter, op string, body []byte) bool {
	if op != "GetShardIterator" || !p.hiding() {
		return false
	}
	var req struct{ ShardId, StreamName string }
	if json.Unmarshal(body, &req) != nil || !p.isHidden(req.ShardId) {
		return false
	}
	writeJSON(w, http.StatusBadRequest, errorBody(CodeResourceNotFound,
		"Shard "+req.ShardId+" in stream "+req.StreamName+" under account 000000000000 does not exist"))
	return true
}

// withoutHidden removes hidden shards from a ListShards answer; any other
// answer, or one it cannot read, is returned as it came.
func (p *Proxy) withoutHidden(op string, status int, resp []byte) []byte {
	if op != "ListShards" || status != http.StatusOK || !p.hiding() {
		return resp
	}
	var out map[string]json.RawMessage
	var shards []json.RawMessage
	if json.Unmarshal(resp, &out) != nil || json.Unmarshal(out["Shards"], &shards) != nil {
		return resp
	}
	kept := shards[:0]
	for _, s := range shards {
		var id struct{ ShardId string }
		if json.Unmarshal(s, &id) == nil && p.isHidden(id.ShardId) {
			continue
		}
		kept = append(kept, s)
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return resp
	}
	out["Shards"] = b
	if b, err = json.Marshal(out); err != nil {
		return resp
	}
	return b
}
