package faultproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Front is a Proxy grown into a realistic Kinesis front: on top of the
// Proxy's per-operation rules it injects read faults (ExpiredIterator, a
// connection reset in the middle of a GetRecords answer, a GetRecords that
// hangs until the client gives up) and enforces the service's per-shard
// limits (see Limits). The embedded Proxy's Set, Clear and Stats work as
// they do on a bare Proxy; clients use Front.URL.
type Front struct {
	*Proxy
	// URL is the front's address, to use as the SDK's endpoint.
	URL string

	srv *http.Server
	ln  net.Listener
	// clock is the clock of the limit windows; tests freeze it.
	clock atomic.Pointer[func() time.Time]

	mu        sync.Mutex
	reads     ReadFaults
	limits    Limits
	iterShard map[string]string // shard iterator -> shardKey
	shards    map[string]*shardWindow
	maps      map[string]*shardMapEntry // stream -> open shards' hash ranges
	fstats    FrontStats
}

// FrontStats counts what the front itself did, on top of Proxy.Stats.
type FrontStats struct {
	ExpiredIterators int
	ResetsMidAnswer  int
	Hangs            int
	ReadsThrottled   int // GetRecords over 5 calls/s or 2 MiB/s of a shard
	RecordsThrottled int // PutRecords entries over 1,000 records/s or 1 MiB/s of a shard
}

// StartFront serves a front to target on listen ("127.0.0.1:0" for a free
// port). The same seed gives the same sequence of random decisions.
func StartFront(target, listen string, seed uint64) (*Front, error) {
	p, err := Start(target, seed)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("listening for the fault proxy front on %s: %w", listen, err)
	}
	f := &Front{
		Proxy:     p,
		URL:       "http://" + ln.Addr().String(),
		ln:        ln,
		iterShard: map[string]string{},
		shards:    map[string]*shardWindow{},
		maps:      map[string]*shardMapEntry{},
	}
	f.SetClock(time.Now)
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// SetClock replaces the clock of the limit windows, so a test can hold time
// still and reach a limit deterministically.
func (f *Front) SetClock(now func() time.Time) { f.clock.Store(&now) }

func (f *Front) now() time.Time { return (*f.clock.Load())() }

// Close stops the front and its proxy.
func (f *Front) Close() error {
	err := f.srv.Close()
	if perr := f.Proxy.Close(); err == nil {
		err = perr
	}
	return err
}

// FrontStats returns a copy of the front's own counts.
func (f *Front) FrontStats() FrontStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fstats
}

// ClearAll removes every rule, read fault and limit.
func (f *Front) ClearAll() {
	f.Proxy.Clear()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = ReadFaults{}
	f.limits = Limits{}
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := operation(r)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch op {
	case "GetRecords":
		f.serveGetRecords(w, r, body)
	case "GetShardIterator":
		tw := &teeWriter{ResponseWriter: w}
		f.Proxy.ServeHTTP(tw, r)
		f.learnIterator(body, tw)
	case "PutRecords":
		if f.limitsOn() {
			f.servePutRecordsLimited(w, r, body)
			return
		}
		f.Proxy.ServeHTTP(w, r)
	default:
		f.Proxy.ServeHTTP(w, r)
	}
}

// teeWriter passes an answer through and keeps a copy to learn from.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (t *teeWriter) WriteHeader(status int) {
	t.status = status
	t.ResponseWriter.WriteHeader(status)
}

func (t *teeWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.body.Write(b)
	return t.ResponseWriter.Write(b)
}

// Hijack lets the Proxy cut connections through the tee.
func (t *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(t.ResponseWriter).Hijack()
}

// learnIterator remembers which shard a new iterator reads.
func (f *Front) learnIterator(reqBody []byte, tw *teeWriter) {
	if tw.status != http.StatusOK {
		return
	}
	var req struct{ ShardId, StreamName, StreamARN string }
	var resp struct{ ShardIterator string }
	if json.Unmarshal(reqBody, &req) != nil || json.Unmarshal(tw.body.Bytes(), &resp) != nil || resp.ShardIterator == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rememberLocked(resp.ShardIterator, shardKey(req.StreamName, req.StreamARN, req.ShardId))
}

// shardKey names a shard of a stream for the per-shard limits: every
// stream's first shard is shardId-000000000000, and each has its own
// limits.
func shardKey(name, arn, shard string) string { return streamOf(name, arn) + "/" + shard }

// streamOf is the stream's name, also when the request names it by ARN.
func streamOf(name, arn string) string {
	if name != "" {
		return name
	}
	return arn[strings.LastIndex(arn, ":stream/")+len(":stream/"):]
}

// shardOfKey is the shard id of a shardKey, as the service names it in
// its messages.
func shardOfKey(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// maxIterators bounds the iterator map: iterators are single-use in
// practice and expire after 5 minutes, so forgetting old ones only means a
// few reads go unlimited.
const maxIterators = 100_000

func (f *Front) rememberLocked(iter, shard string) {
	if len(f.iterShard) >= maxIterators {
		clear(f.iterShard)
	}
	f.iterShard[iter] = shard
}
