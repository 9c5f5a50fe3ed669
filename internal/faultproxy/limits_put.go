package faultproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// call sends an operation of the front's own to the emulator, with the
// client's headers (the emulators do not verify signatures).
func (f *Front) call(r *http.Request, op string, body []byte) (int, []byte, error) {
	u := *f.target
	u.Path = "/"
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, vs := range r.Header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	req.Header.Set("X-Amz-Target", "Kinesis_20131202."+op)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("calling %s for the limits: %w", op, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// servePutRecordsLimited is the Proxy's PutRecords handling with the write
// limits applied per entry before the random refusals.
func (f *Front) servePutRecordsLimited(w http.ResponseWriter, r *http.Request, body []byte) {
	const op = "PutRecords"
	d := f.decide(op)
	if answerRequestFaults(w, r, op, body, d) {
		return
	}

	status, resp, err := f.putLimited(r, body, d.rule)
	if answerForwardFaults(w, d, err) {
		return
	}
	writeJSON(w, status, resp)
}

func (f *Front) putLimited(r *http.Request, body []byte, rule Rule) (int, []byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, nil, fmt.Errorf("decoding PutRecords request: %w", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(req["Records"], &raw); err != nil {
		return 0, nil, fmt.Errorf("decoding PutRecords entries: %w", err)
	}
	m, err := f.shardMap(r, req)
	if err != nil {
		return 0, nil, err
	}

	refused := make([]json.RawMessage, len(raw)) // nil = forwarded
	var kept []json.RawMessage
	codes := rule.EntryFailCodes
	if len(codes) == 0 {
		codes = []string{CodeThrottled, CodeInternalFailure}
	}
	f.mu.Lock()
	now, lim := f.now(), f.limits
	for i, e := range raw {
		var pe putEntry
		_ = json.Unmarshal(e, &pe)
		shard := m.shardOf(pe.hashKey())
		if shard != "" && !f.windowLocked(m.stream+"/"+shard).allowWrite(now, len(pe.Data)+len(pe.PartitionKey), lim.recordsPerSecond(), lim.writeBytesPerSecond()) {
			f.fstats.RecordsThrottled++
			refused[i] = entryError(CodeThrottled, fmt.Sprintf("Rate exceeded for shard %s in stream under account 000000000000.", shard))
			continue
		}
		if f.drawOne(rule.EntryFailRate) {
			refused[i] = entryError(codes[f.drawIndex(len(codes))], "Refused by the fault proxy.")
			continue
		}
		kept = append(kept, e)
	}
	f.mu.Unlock()
	f.Proxy.mu.Lock()
	st := f.statsLocked("PutRecords")
	st.EntriesRefused += len(raw) - len(kept)
	st.EntriesForwarded += len(kept)
	f.Proxy.mu.Unlock()

	out := map[string]json.RawMessage{}
	var results []json.RawMessage
	if len(kept) > 0 {
		if req["Records"], err = json.Marshal(kept); err != nil {
			return 0, nil, err
		}
		fwd, err := json.Marshal(req)
		if err != nil {
			return 0, nil, err
		}
		status, _, resp, err := f.forward(r, "PutRecords", fwd)
		if err != nil || status != http.StatusOK {
			// The emulator's own error stands for the whole request.
			return status, resp, err
		}
		if err := json.Unmarshal(resp, &out); err != nil {
			return 0, nil, fmt.Errorf("decoding PutRecords answer: %w", err)
		}
		if err := json.Unmarshal(out["Records"], &results); err != nil {
			return 0, nil, fmt.Errorf("decoding PutRecords results: %w", err)
		}
		if len(results) != len(kept) {
			return 0, nil, errors.New("the emulator answered a different number of results than entries")
		}
	}
	spliced := make([]json.RawMessage, len(raw))
	failed, next := 0, 0
	for i := range raw {
		if refused[i] != nil {
			spliced[i] = refused[i]
			failed++
			continue
		}
		spliced[i] = results[next]
		if bytes.Contains(results[next], []byte(`"ErrorCode"`)) {
			failed++
		}
		next++
	}
	if out["Records"], err = json.Marshal(spliced); err != nil {
		return 0, nil, err
	}
	out["FailedRecordCount"] = json.RawMessage(fmt.Sprint(failed))
	resp, err := json.Marshal(out)
	return http.StatusOK, resp, err
}

// drawIndex draws an index below n from the seeded source.
func (p *Proxy) drawIndex(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

// entryError is the result of a PutRecords entry a limit refused.
func entryError(code, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"ErrorCode": code, "ErrorMessage": msg})
	return b
}
