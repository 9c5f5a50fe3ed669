package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"
)

// outputDownAt is when, from the start of the load, the OutputDown phase's
// sink starts answering 503: the instances have read, and their batches
// are in flight, when their output goes down.
const outputDownAt = 2 * time.Second

// outageSink is the OutputDown phase's output: an HTTP server each
// incarnation's http_client posts its delivery lines to (one message a
// request, at /<incarnation>), which appends each to that incarnation's
// delivery file, except while it is down: then it answers 503 and writes
// nothing. The instances' output names every message that failed, so a
// downstream outage fails every record of each delivery at once (issue
// 59, item 5): the input must not charge those failures against the
// records' redelivery.max_attempts.
type outageSink struct {
	dir string
	srv *httptest.Server

	mu        sync.Mutex
	downFrom  time.Time
	downUntil time.Time
	refused   int
	files     map[string]*os.File
}

func newOutageSink(dir string) *outageSink {
	s := &outageSink{dir: dir, files: map[string]*os.File{}}
	s.srv = httptest.NewServer(s)
	return s
}

func (s *outageSink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := time.Now(); !now.Before(s.downFrom) && now.Before(s.downUntil) {
		s.refused++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	inc := path.Base(req.URL.Path)
	f := s.files[inc]
	if f == nil {
		if f, err = os.OpenFile(filepath.Join(s.dir, inc+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		s.files[inc] = f
	}
	// One write per line, so that a reader of the file sees whole lines.
	if _, err := f.Write(append(body, '\n')); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
	}
}

// down makes the sink answer 503 from now for d.
func (s *outageSink) down(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downFrom = time.Now()
	s.downUntil = s.downFrom.Add(d)
}

// report says how long the sink was down and what it refused.
func (s *outageSink) report() (refused int, down time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused, s.downUntil.Sub(s.downFrom)
}

// close stops the server and closes the delivery files.
func (s *outageSink) close() {
	s.srv.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		_ = f.Close()
	}
}

// output is incarnation inc's output to the sink, as YAML under `output:`:
// one retry, so a failed write comes back to the input within a second.
func (s *outageSink) output(inc string) string {
	return fmt.Sprintf("http_client: { url: '%s/%s', verb: POST, retries: 1, retry_period: 100ms }", s.srv.URL, inc)
}

// outputGoesDown is the OutputDown event: the sink answers 503 for
// Config.OutputDown.
func (r *runner) outputGoesDown(context.Context) error {
	r.sink.down(r.cfg.OutputDown)
	return nil
}

// outageScenario is the table's evidence of the outage, or an error if the
// sink refused nothing: the phase would not have tested its case.
func (r *runner) outageScenario() (string, error) {
	refused, down := r.sink.report()
	if refused == 0 {
		return "", fmt.Errorf("the sink refused no request in its %v outage: the phase did not test its case", down)
	}
	return fmt.Sprintf("output down %v: the sink answered 503 to %d requests", down, refused), nil
}
