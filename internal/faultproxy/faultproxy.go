// Package faultproxy is an HTTP proxy to put between the AWS SDK and a Kinesis
// emulator in tests. Neither emulator throttles or fails, so the faults a
// real stream produces (throttled requests, 5xx, PutRecords entries refused,
// dropped connections, latency) come from here, switched on and off at run
// time by the test, per API operation, with a seeded random source.
//
// It speaks the Kinesis JSON protocol over HTTP/1.1: the operation is the
// suffix of the `X-Amz-Target` header (`Kinesis_20131202.PutRecords`), the
// body JSON. Refused PutRecords entries are refused for real: only the other
// entries reach the emulator, and synthetic error results are spliced back in
// at the refused entries' indices, so a record the proxy refused was never
// written.
//
// To grow it (read faults, per-shard limits), add fields to Rule and handle
// them in ServeHTTP, or set Rule.Hook for a one-off behaviour.
package faultproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Error codes the proxy answers with.
const (
	CodeThrottled       = "ProvisionedThroughputExceededException"
	CodeInternalFailure = "InternalFailure"
)

// AllOperations is the Set key of the rule used for operations without a
// rule of their own.
const AllOperations = ""

// Rule is what the proxy does to requests of one operation. Rates are
// fractions in [0, 1] drawn independently per request (per entry for
// EntryFailRate); zero disables a fault.
type Rule struct {
	// Latency is added before the request is handled.
	Latency time.Duration
	// ThrottleRate of requests are answered 400 with
	// ProvisionedThroughputExceededException, without reaching the emulator.
	ThrottleRate float64
	// ErrorRate of requests are answered 500 InternalFailure, without
	// reaching the emulator.
	ErrorRate float64
	// CutRate of requests have their connection closed with no answer,
	// without reaching the emulator.
	CutRate float64
	// CutAfterRate of requests reach the emulator, then have their connection
	// closed: the write happened but the client cannot know, which is how a
	// real network makes a producer write a record twice.
	CutAfterRate float64
	// EntryFailRate of PutRecords entries are refused: not forwarded, and
	// answered with one of EntryFailCodes (default: throttling and
	// InternalFailure, alternately at random).
	EntryFailRate  float64
	EntryFailCodes []string
	// Hook, when set, sees each request first; a non-nil Response is sent as
	// the answer and nothing else happens.
	Hook func(op string, body []byte) *Response
}

// Response is a synthetic answer.
type Response struct {
	Status int
	Body   []byte
}

// Stats counts what the proxy did, per operation.
type Stats struct {
	Requests         int
	Forwarded        int
	Throttled        int
	Errors           int
	Cut              int
	CutAfter         int
	EntriesRefused   int
	EntriesForwarded int
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is the proxy's address, to use as the SDK's endpoint.
	URL string

	target *url.URL
	client *http.Client
	srv    *http.Server
	ln     net.Listener

	mu    sync.Mutex
	rules map[string]Rule
	rng   *rand.Rand
	stats map[string]*Stats
}

// Start serves a proxy to target (the emulator's endpoint URL) on a free
// loopback port. The same seed gives the same sequence of decisions.
func Start(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("parsing target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the fault proxy: %w", err)
	}
	p := &Proxy{
		URL:    "http://" + ln.Addr().String(),
		target: u,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 4 * time.Second}}, // under the emulators' keep-alive (5 s, 60 s)
		ln:     ln,
		rules:  map[string]Rule{},
		rng:    rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15)),
		stats:  map[string]*Stats{},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Set installs the rule for an operation ("PutRecords", "GetRecords"...), or
// for every operation without its own with AllOperations.
func (p *Proxy) Set(op string, r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules[op] = r
}

// Clear removes every rule: the proxy forwards everything untouched.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.rules)
}

// Stats returns a copy of the counts for an operation.
func (p *Proxy) Stats(op string) Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.stats[op]; s != nil {
		return *s
	}
	return Stats{}
}

// Operations lists, sorted, every API operation the proxy has received.
func (p *Proxy) Operations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.stats))
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() error {
	p.client.CloseIdleConnections()
	return p.srv.Close()
}

// decision is what happens to one request, drawn under the lock.
type decision struct {
	rule     Rule
	throttle bool
	fail     bool
	cut      bool
	cutAfter bool
}

func (p *Proxy) decide(op string) decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.rules[op]
	if !ok {
		r = p.rules[AllOperations]
	}
	st := p.statsLocked(op)
	st.Requests++
	d := decision{rule: r}
	switch {
	case p.draw(r.CutRate):
		d.cut = true
		st.Cut++
	case p.draw(r.ThrottleRate):
		d.throttle = true
		st.Throttled++
	case p.draw(r.ErrorRate):
		d.fail = true
		st.Errors++
	case p.draw(r.CutAfterRate):
		d.cutAfter = true
		st.CutAfter++
	}
	return d
}

// answerForwardFaults answers a request whose forward failed (502) or whose
// connection the decision cuts after the service answered, and reports
// whether it did.
func answerForwardFaults(w http.ResponseWriter, d decision, err error) bool {
	if err != nil {
		http.Error(w, "fault proxy: "+err.Error(), http.StatusBadGateway)
		return true
	}
	if d.cutAfter {
		cut(w)
		return true
	}
	return false
}

// draw must be called with the lock held.
func (p *Proxy) draw(rate float64) bool { return rate > 0 && p.rng.Float64() < rate }

func (p *Proxy) statsLocked(op string) *Stats { return entryOf(p.stats, op) }

// entryOf returns m[k], adding a zero value first when k has none.
func entryOf[K comparable, V any](m map[K]*V, k K) *V {
	v := m[k]
	if v == nil {
		v = new(V)
		m[k] = v
	}
	return v
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := operation(r)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := p.decide(op)

	if answerRequestFaults(w, r, op, body, d) {
		return
	}

	var (
		status int
		header http.Header
		resp   []byte
	)
	if op == "PutRecords" && d.rule.EntryFailRate > 0 {
		status, header, resp, err = p.putRecordsWithRefusals(r, body, d.rule)
	} else {
		status, header, resp, err = p.forward(r, op, body)
	}
	if answerForwardFaults(w, d, err) {
		return
	}
	for _, k := range []string{"Content-Type", "X-Amzn-Requestid", "X-Amz-Id-2"} {
		if v := header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(resp)))
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

// operation is the API operation named by the X-Amz-Target header.
func operation(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}

func (p *Proxy) forward(r *http.Request, op string, body []byte) (int, http.Header, []byte, error) {
	u := *p.target
	u.Path = r.URL.Path
	u.RawQuery = r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range r.Header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	req.ContentLength = int64(len(body))
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("forwarding %s: %w", op, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the answer to %s: %w", op, err)
	}
	p.mu.Lock()
	p.statsLocked(op).Forwarded++
	p.mu.Unlock()
	return resp.StatusCode, resp.Header, out, nil
}

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

func errorEntry(code string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{
		"ErrorCode":    code,
		"ErrorMessage": "Refused by the fault proxy: " + code,
	})
	return b
}

func errorBody(code, msg string) []byte {
	b, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	return b
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// cut closes the client's connection without an answer.
func cut(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // net/http closes the connection
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// answerRequestFaults applies a decision's whole-request faults (latency,
// hook, cut, throttle, 500) and reports whether it answered the request, in
// which case nothing may be forwarded.
func answerRequestFaults(w http.ResponseWriter, r *http.Request, op string, body []byte, d decision) bool {
	if d.rule.Latency > 0 {
		select {
		case <-time.After(d.rule.Latency):
		case <-r.Context().Done():
			return true
		}
	}
	if d.rule.Hook != nil {
		if resp := d.rule.Hook(op, body); resp != nil {
			writeJSON(w, resp.Status, resp.Body)
			return true
		}
	}
	switch {
	case d.cut:
		cut(w)
		return true
	case d.throttle:
		writeJSON(w, http.StatusBadRequest, errorBody(CodeThrottled, "Rate exceeded for stream (injected by the fault proxy)."))
		return true
	case d.fail:
		writeJSON(w, http.StatusInternalServerError, errorBody(CodeInternalFailure, "Internal service failure (injected by the fault proxy)."))
		return true
	}
	return false
}
