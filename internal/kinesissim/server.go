// Package kinesissim is a Kinesis Data Streams simulator for scale runs: an
// HTTP server speaking the service's JSON protocol (awsJson1_1, the
// operation named by `X-Amz-Target: Kinesis_20131202.<Op>`), as the AWS SDK
// for Go v2 sends it, cheap enough per call and per shard to serve tens of
// thousands of shards polled by many consumers on a small machine.
//
// It is a measuring instrument, not an emulator to test the protocol
// against: it serves the operations the connector's input and output call
// (stream and shard listing with pagination, shard iterators of every type,
// GetRecords, PutRecords and PutRecord, CreateStream, DeleteStream, tags),
// answers errors in the service's shape ({"__type": ..., "message": ...}
// with HTTP 400), and leaves out what those runs do not need: signatures
// are not checked, shards never close or split, nothing is throttled,
// records are kept for the server's life (no retention), and there is no
// enhanced fan-out.
//
// Streams are ACTIVE as soon as they are created. Records are held per
// shard in one slice; sequence numbers are 56-digit decimals made from one
// counter, so they compare as the service's do (as integers, and equally
// as strings of one width). Shard iterators carry their position and issue
// time themselves and expire after five minutes, as the service's do.
package kinesissim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Server.
type Options struct {
	// Addr is the address to listen on; empty means "127.0.0.1:0" (a free
	// port).
	Addr string
	// Region and AccountID go into stream ARNs; empty means "us-east-1"
	// and "000000000000".
	Region    string
	AccountID string
}

// Server is a running simulator.
type Server struct {
	opts Options
	ln   net.Listener
	http *http.Server
	done chan struct{}

	// seq is the last sequence counter value given to a record.
	seq atomic.Uint64
	gen atomic.Uint64

	// streams is replaced whole on every create and delete (rare), so
	// every call reads it without a lock.
	writeMu sync.Mutex
	streams atomic.Pointer[catalog]

	calls map[string]*atomic.Int64
	other sync.Map // calls of operations not served, by name

	closeOnce sync.Once
	closeErr  error
}

// catalog is an immutable set of streams.
type catalog struct {
	byName map[string]*stream
	byGen  map[uint64]*stream
	names  []string // sorted
}

// handler serves one operation from its JSON request body.
type handler func(s *Server, body []byte, w *answer) error

var handlers = map[string]handler{
	"ListShards":            (*Server).listShards,
	"DescribeStreamSummary": (*Server).describeStreamSummary,
	"DescribeStream":        (*Server).describeStream,
	"ListStreams":           (*Server).listStreams,
	"ListTagsForStream":     (*Server).listTagsForStream,
	"GetShardIterator":      (*Server).getShardIterator,
	"GetRecords":            (*Server).getRecords,
	"PutRecords":            (*Server).putRecords,
	"PutRecord":             (*Server).putRecord,
	"CreateStream":          (*Server).createStreamOp,
	"DeleteStream":          (*Server).deleteStream,
}

// Start listens on opts.Addr and serves until Close or until ctx ends.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.AccountID == "" {
		opts.AccountID = "000000000000"
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", opts.Addr, err)
	}
	s := &Server{opts: opts, ln: ln, done: make(chan struct{}), calls: make(map[string]*atomic.Int64, len(handlers))}
	for op := range handlers {
		s.calls[op] = new(atomic.Int64)
	}
	s.streams.Store(&catalog{byName: map[string]*stream{}, byGen: map[uint64]*stream{}})
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		// Longer than any client keeps an idle connection (the project's
		// 4 s, the SDK's default 90 s), so the client always closes first
		// and never sends on a connection the server is closing.
		IdleTimeout: 120 * time.Second,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Endpoint is the URL to point a Kinesis client at.
func (s *Server) Endpoint() string { return "http://" + s.ln.Addr().String() }

// Calls returns the calls served per operation since start, failed ones
// included (operations never called are left out).
func (s *Server) Calls() map[string]int64 {
	out := make(map[string]int64)
	for op, n := range s.calls {
		if v := n.Load(); v > 0 {
			out[op] = v
		}
	}
	s.other.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Close stops the server and closes its connections.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.http.Close()
		<-s.done
	})
	return s.closeErr
}

// CreateStream creates a provisioned stream of the given shards, ACTIVE at
// once, its hash key space split evenly as the service splits it.
func (s *Server) CreateStream(name string, shards int) error {
	_, err := s.create(name, shards, "PROVISIONED", nil)
	return err
}

func (s *Server) arn(name string) string {
	return fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/%s", s.opts.Region, s.opts.AccountID, name)
}

func (s *Server) create(name string, shards int, mode string, tags map[string]string) (*stream, error) {
	if !validStreamName(name) {
		return nil, apiError{code: codeValidation, msg: fmt.Sprintf("1 validation error detected: Value '%s' at 'streamName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+ and have length 1 to 128", name)}
	}
	if shards < 1 {
		return nil, apiError{code: codeInvalidArgument, msg: fmt.Sprintf("Stream %s: the shard count must be at least 1, not %d", name, shards)}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	old := s.streams.Load()
	if _, ok := old.byName[name]; ok {
		return nil, apiError{code: codeResourceInUse, msg: fmt.Sprintf("Stream %s under account %s already exists.", name, s.opts.AccountID)}
	}
	// The shards' starting sequence number takes a counter value of its
	// own, so it is never a record's (of this stream or another): a
	// GetShardIterator at it is at the shard's start, and only there.
	st := newStream(name, s.arn(name), s.gen.Add(1), shards, time.Now(), s.seq.Add(1))
	st.mode, st.tags = mode, tags
	next := &catalog{byName: make(map[string]*stream, len(old.byName)+1), byGen: make(map[uint64]*stream, len(old.byGen)+1)}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	for k, v := range old.byGen {
		next.byGen[k] = v
	}
	next.byName[name], next.byGen[st.gen] = st, st
	i := sort.SearchStrings(old.names, name)
	next.names = make([]string, 0, len(old.names)+1)
	next.names = append(append(append(next.names, old.names[:i]...), name), old.names[i:]...)
	s.streams.Store(next)
	return st, nil
}

func (s *Server) remove(st *stream) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	old := s.streams.Load()
	if old.byName[st.name] != st {
		return
	}
	next := &catalog{byName: make(map[string]*stream, len(old.byName)), byGen: make(map[uint64]*stream, len(old.byGen)), names: make([]string, 0, len(old.names))}
	for k, v := range old.byName {
		if v != st {
			next.byName[k] = v
		}
	}
	for k, v := range old.byGen {
		if v != st {
			next.byGen[k] = v
		}
	}
	for _, n := range old.names {
		if n != st.name {
			next.names = append(next.names, n)
		}
	}
	s.streams.Store(next)
}

func validStreamName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// lookup finds the stream a request names, by name or by ARN.
func (s *Server) lookup(name, arn string) (*stream, error) {
	switch {
	case name == "" && arn == "":
		return nil, apiError{code: codeInvalidArgument, msg: "Neither StreamName nor StreamARN was given."}
	case arn != "":
		n, ok := strings.CutPrefix(arn, fmt.Sprintf("arn:aws:kinesis:%s:%s:stream/", s.opts.Region, s.opts.AccountID))
		if !ok {
			return nil, apiError{code: codeResourceNotFound, msg: fmt.Sprintf("Stream %s under account %s not found.", arn, s.opts.AccountID)}
		}
		if name != "" && name != n {
			return nil, apiError{code: codeInvalidArgument, msg: fmt.Sprintf("StreamName %s and StreamARN %s name different streams.", name, arn)}
		}
		name = n
	}
	st, ok := s.streams.Load().byName[name]
	if !ok {
		return nil, apiError{code: codeResourceNotFound, msg: fmt.Sprintf("Stream %s under account %s not found.", name, s.opts.AccountID)}
	}
	return st, nil
}

// Error codes, as the service names them.
const (
	codeResourceNotFound  = "ResourceNotFoundException"
	codeResourceInUse     = "ResourceInUseException"
	codeInvalidArgument   = "InvalidArgumentException"
	codeExpiredIterator   = "ExpiredIteratorException"
	codeExpiredNextToken  = "ExpiredNextTokenException"
	codeValidation        = "ValidationException"
	codeSerialization     = "SerializationException"
	codeUnknownOperation  = "UnknownOperationException"
	codeInternalFailure   = "InternalFailure"
	codeMissingAuthHeader = "MissingAuthenticationTokenException"
)

// apiError is an error answered in the service's shape.
type apiError struct{ code, msg string }

func (e apiError) Error() string { return e.code + ": " + e.msg }

const targetPrefix = "Kinesis_20131202."

// maxBody bounds a request body: PutRecords takes at most 5 MiB of records,
// which base64 makes 4/3 as long, plus keys and JSON.
const maxBody = 16 << 20

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := &answer{w: w}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if r.Method != http.MethodPost || !ok {
		a.fail(apiError{code: codeUnknownOperation, msg: "Send a POST with X-Amz-Target: " + targetPrefix + "<Operation>."})
		return
	}
	h, ok := handlers[op]
	if !ok {
		n, _ := s.other.LoadOrStore(op, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		a.fail(apiError{code: codeUnknownOperation, msg: "The simulator does not serve " + op + "."})
		return
	}
	s.calls[op].Add(1)
	if r.Header.Get("Authorization") == "" {
		a.fail(apiError{code: codeMissingAuthHeader, msg: "Missing Authentication Token"})
		return
	}
	body, err := readBody(r)
	if err != nil {
		a.fail(apiError{code: codeSerialization, msg: err.Error()})
		return
	}
	if err := h(s, body, a); err != nil {
		a.fail(err)
	}
}

func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, fmt.Errorf("the request body of %d bytes is over the %d the simulator reads", r.ContentLength, maxBody)
	}
	var b []byte
	if r.ContentLength > 0 {
		b = make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

// answer writes one response.
type answer struct {
	w http.ResponseWriter
}

func (a *answer) header() {
	h := a.w.Header()
	h["Content-Type"] = []string{"application/x-amz-json-1.1"}
}

// raw sends a JSON body written by hand. A failed write is the client's
// connection gone: there is no one left to answer.
func (a *answer) raw(b []byte) error {
	a.header()
	a.w.Header()["Content-Length"] = []string{strconv.Itoa(len(b))}
	a.w.WriteHeader(http.StatusOK)
	_, _ = a.w.Write(b)
	return nil
}

// json sends v encoded.
func (a *answer) json(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return apiError{code: codeInternalFailure, msg: err.Error()}
	}
	return a.raw(b)
}

func (a *answer) fail(err error) {
	var e apiError
	if !errors.As(err, &e) {
		e = apiError{code: codeInternalFailure, msg: err.Error()}
	}
	status := http.StatusBadRequest
	if e.code == codeInternalFailure {
		status = http.StatusInternalServerError
	}
	a.header()
	a.w.Header()["X-Amzn-Errortype"] = []string{e.code}
	a.w.WriteHeader(status)
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{e.code, e.msg})
	_, _ = a.w.Write(b)
}

// decode reads a request body into v, answering a malformed one as the
// service does.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return apiError{code: codeSerialization, msg: fmt.Sprintf("reading the request: %v", err)}
	}
	return nil
}
