package faultproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Error code of an iterator older than five minutes.
const CodeExpiredIterator = "ExpiredIteratorException"

// DefaultHangMax bounds a hung GetRecords when ReadFaults.HangMax is zero:
// well past any sane client timeout, short enough not to pin goroutines.
const DefaultHangMax = 2 * time.Minute

// ReadFaults are the GetRecords faults of a Front. Rates are fractions in
// [0, 1] drawn per GetRecords call, in this order; zero disables a fault.
type ReadFaults struct {
	// ExpiredIteratorRate of calls are answered 400 ExpiredIteratorException
	// without reaching the emulator, as if the iterator were 5 minutes old.
	ExpiredIteratorRate float64
	// HangRate of calls get no answer until the client gives up (closes the
	// connection) or HangMax passes, whichever is first.
	HangRate float64
	HangMax  time.Duration
	// ResetRate of calls reach the emulator, then the connection is closed
	// halfway through the answer's body: the client sees a truncated
	// response, as when a connection resets mid-transfer.
	ResetRate float64
}

// SetReadFaults installs the GetRecords faults; the zero value removes them.
func (f *Front) SetReadFaults(rf ReadFaults) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = rf
}

// drawOne draws one random decision under the Proxy's lock, so the front and
// the proxy share one seeded sequence.
func (p *Proxy) drawOne(rate float64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.draw(rate)
}

func (f *Front) serveGetRecords(w http.ResponseWriter, r *http.Request, body []byte) {
	var req struct{ ShardIterator string }
	_ = json.Unmarshal(body, &req)

	f.mu.Lock()
	shard := f.iterShard[req.ShardIterator]
	rf := f.reads
	throttled := f.limits.Reads && shard != "" && !f.windowLocked(shard).allowRead(f.now(), f.limits.readsPerSecond(), f.limits.readBytesPerSecond())
	if throttled {
		f.fstats.ReadsThrottled++
	}
	f.mu.Unlock()

	if throttled {
		// The service's words, so log readers recognise them.
		writeJSON(w, http.StatusBadRequest, errorBody(CodeThrottled,
			fmt.Sprintf("Rate exceeded for Shard - %s in stream under account 000000000000.", shardOfKey(shard))))
		return
	}
	switch {
	case f.drawOne(rf.ExpiredIteratorRate):
		f.count(func(s *FrontStats) { s.ExpiredIterators++ })
		writeJSON(w, http.StatusBadRequest, errorBody(CodeExpiredIterator,
			"Iterator expired. The iterator was created at time "+f.now().Add(-6*time.Minute).UTC().Format(time.RFC1123)+" while right now it is "+f.now().UTC().Format(time.RFC1123)+" which is further in the future than the tolerated delay of 300000 milliseconds."))
		return
	case f.drawOne(rf.HangRate):
		f.count(func(s *FrontStats) { s.Hangs++ })
		max := rf.HangMax
		if max <= 0 {
			max = DefaultHangMax
		}
		t := time.NewTimer(max)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-t.C:
		}
		cut(w)
		return
	case f.drawOne(rf.ResetRate):
		f.count(func(s *FrontStats) { s.ResetsMidAnswer++ })
		f.resetMidAnswer(w, r, body)
		return
	}

	tw := &teeWriter{ResponseWriter: w}
	f.Proxy.ServeHTTP(tw, r)
	if shard == "" {
		return
	}
	if tw.status != http.StatusOK {
		// A call the proxy's rules refused (throttled, 5xx, cut) did no
		// work, so it does not use up the shard's calls for this second.
		f.mu.Lock()
		if f.limits.Reads {
			f.windowLocked(shard).unread()
		}
		f.mu.Unlock()
		return
	}
	var resp struct{ NextShardIterator string }
	if json.Unmarshal(tw.body.Bytes(), &resp) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if resp.NextShardIterator != "" {
		f.rememberLocked(resp.NextShardIterator, shard)
	}
	// Record data travels base64-encoded: three bytes of data per four.
	f.windowLocked(shard).addReadBytes(f.now(), tw.body.Len()*3/4)
}

// resetMidAnswer forwards the call, then writes the status line, headers
// and half of the body by hand and closes the connection.
func (f *Front) resetMidAnswer(w http.ResponseWriter, r *http.Request, body []byte) {
	status, _, resp, err := f.forward(r, "GetRecords", body)
	if err != nil {
		http.Error(w, "fault proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %d %s\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: %d\r\n\r\n",
		status, http.StatusText(status), len(resp))
	_, _ = buf.Write(head.Bytes())
	_, _ = buf.Write(resp[:len(resp)/2])
	_ = buf.Flush()
}

func (f *Front) count(fn func(*FrontStats)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.fstats)
}
