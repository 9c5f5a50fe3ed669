package faultproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// decision is what happens to one request, drawn under the lock.
type decision struct {
	rule     Rule
	throttle bool
	fail     bool
	cut      bool
	cutAfter bool
}

// decide draws the faults of one request of op under the operation's rule
// (or the AllOperations one) and counts them.
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

// errorBody is a Kinesis JSON error answer.
func errorBody(code, msg string) []byte {
	b, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	return b
}

// writeJSON answers with body as the Kinesis JSON protocol does.
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
