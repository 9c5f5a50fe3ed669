package faultproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// putRecordsWithRefusals forwards the entries not drawn for refusal and
// splices synthetic failures back in at the refused indices.
func (p *Proxy) putRecordsWithRefusals(r *http.Request, body []byte, rule Rule) (int, http.Header, []byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, nil, nil, fmt.Errorf("decoding PutRecords request: %w", err)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(req["Records"], &entries); err != nil {
		return 0, nil, nil, fmt.Errorf("decoding PutRecords entries: %w", err)
	}
	codes := rule.EntryFailCodes
	if len(codes) == 0 {
		codes = []string{CodeThrottled, CodeInternalFailure}
	}

	refused := make([]string, len(entries)) // code per index, "" = forwarded
	var kept []json.RawMessage
	p.mu.Lock()
	st := p.statsLocked("PutRecords")
	for i, e := range entries {
		if p.draw(rule.EntryFailRate) {
			refused[i] = codes[p.rng.IntN(len(codes))]
			st.EntriesRefused++
			continue
		}
		kept = append(kept, e)
		st.EntriesForwarded++
	}
	p.mu.Unlock()

	var (
		results = []json.RawMessage{}
		header  = http.Header{"Content-Type": {"application/x-amz-json-1.1"}}
		out     = map[string]json.RawMessage{}
	)
	if len(kept) > 0 {
		var err error
		if req["Records"], err = json.Marshal(kept); err != nil {
			return 0, nil, nil, err
		}
		fwd, err := json.Marshal(req)
		if err != nil {
			return 0, nil, nil, err
		}
		status, h, resp, err := p.forward(r, "PutRecords", fwd)
		if err != nil || status != http.StatusOK {
			// The emulator's own error stands for the whole request.
			return status, h, resp, err
		}
		header = h
		if err := json.Unmarshal(resp, &out); err != nil {
			return 0, nil, nil, fmt.Errorf("decoding PutRecords answer: %w", err)
		}
		if err := json.Unmarshal(out["Records"], &results); err != nil {
			return 0, nil, nil, fmt.Errorf("decoding PutRecords results: %w", err)
		}
		if len(results) != len(kept) {
			return 0, nil, nil, errors.New("the emulator answered a different number of results than entries")
		}
	}

	var (
		spliced = make([]json.RawMessage, len(entries))
		failed  = 0
		next    = 0
	)
	for i, code := range refused {
		if code == "" {
			spliced[i] = results[next]
			if bytes.Contains(results[next], []byte(`"ErrorCode"`)) {
				failed++
			}
			next++
			continue
		}
		spliced[i] = errorEntry(code)
		failed++
	}
	var err error
	if out["Records"], err = json.Marshal(spliced); err != nil {
		return 0, nil, nil, err
	}
	out["FailedRecordCount"] = json.RawMessage(fmt.Sprint(failed))
	resp, err := json.Marshal(out)
	return http.StatusOK, header, resp, err
}

// errorEntry is the result of a PutRecords entry the proxy refused.
func errorEntry(code string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{
		"ErrorCode":    code,
		"ErrorMessage": "Refused by the fault proxy: " + code,
	})
	return b
}
