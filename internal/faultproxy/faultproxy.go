package faultproxy

import (
	"bytes"
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
	// hidden are the shards that look trimmed (hide.go).
	hidden map[string]bool
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

	if answerRequestFaults(w, r, op, body, d) || p.refuseHidden(w, op, body) {
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
	resp = p.withoutHidden(op, status, resp)
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
