package chaos

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
)

// The input logs a warning when a shard has waited for the byte budget
// longer than lag_warn_threshold (the soak sets it to budgetWaitBound), and
// another when the budget has let no shard in for a minute, which only a
// pipeline that stops acking can cause. The soak's pipelines ack all along
// (a file, a slow step, some nacks), so the invariant is "no shard waits
// for the budget longer than the bound while the pipeline acks". The
// pipeline acks nothing the input withholds: while Redis is out of reach,
// or the instance is cut off from it or paused, its readers deliver
// nothing until their leases are confirmed, and the records they hold keep
// their room. So a warned wait is measured from its oldest shard's start
// to its end (the INFO line budget.LetInAgain, or the last check while
// the instance ran), the time under such faults is taken out
// (withholdings), and a breach is a rest over the bound (seed 15 with efo:
// a wait of about 36 s of which 17 s were a Redis wipe and a Redis pause,
// after a slow output took 19 s for 2,746 records, 2,575 of them one
// subscription event). A
// warned wait with no such fault in it is a breach at once, as is the
// stall warning.
var budgetWaitWarnings = []string{
	"has held shards back for", // a shard waited longer than lag_warn_threshold
	"has let no shard in for",  // the head of the queue had no grant for a minute
}

// budgetWaitOnKinesis marks the warning the input logs when more than
// half of the room was reserved for calls Kinesis had not answered: the
// shards waited for the emulator, not for the pipeline. Counted apart,
// not a breach (seed 9's hour with efo: kinesis-mock left some GetRecords
// calls unanswered for a minute). A shard that Kinesis never answers is
// liveness's to judge.
const budgetWaitOnKinesis = budget.CallsNotAnswered

// logTail reads what the instances appended to their logs since the last
// call, whole lines only.
type logTail struct {
	offsets map[string]int64
	partial map[string][]byte
}

// lines calls fn with each new whole line of each log.
func (t *logTail) lines(paths []string, fn func(path string, line []byte)) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := f.Seek(t.offsets[p], io.SeekStart); err != nil {
			f.Close()
			return err
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return err
		}
		t.offsets[p] += int64(len(b))
		b = append(t.partial[p], b...)
		cut := bytes.LastIndexByte(b, '\n')
		if cut < 0 {
			t.partial[p] = b
			continue
		}
		t.partial[p] = append([]byte(nil), b[cut+1:]...)
		for _, l := range bytes.Split(b[:cut], []byte("\n")) {
			fn(p, l)
		}
	}
	return nil
}

// budgetWaits checks the instances' new log lines for a budget warning,
// then judges the warned waits not yet ended.
func (m *monitor) budgetWaits() error {
	var logs []string
	for _, out := range m.s.outputFiles() {
		logs = append(logs, strings.TrimSuffix(out, ".jsonl")+".log")
	}
	err := m.logs.lines(logs, func(path string, line []byte) {
		inc := strings.TrimSuffix(filepath.Base(path), ".log")
		if bytes.Contains(line, []byte(budget.LetInAgain)) {
			if w := m.waits[inc]; w != nil {
				delete(m.waits, inc)
				m.judgeWait(w, lineTime(line), true)
			}
			return
		}
		for _, warning := range budgetWaitWarnings {
			if bytes.Contains(line, []byte(warning)) {
				m.budgetWarning(inc, warning, line)
				return
			}
		}
	})
	if err != nil {
		return err
	}
	now := time.Now()
	for inc, w := range m.waits {
		if !m.s.running(inc) {
			// Judged up to its last check while it ran; the process's end
			// ended the wait.
			delete(m.waits, inc)
			continue
		}
		// The end's line may be a tick and a log read away.
		if m.judgeWait(w, now.Add(-budgetWaitLag), false) {
			delete(m.waits, inc)
		}
	}
	return nil
}

// budgetWaitLag is how late the line that ends a warned wait may be read
// after the wait ended: the input looks once a second (budget.CheckInterval)
// and the monitor reads the logs every tick.
const budgetWaitLag = budget.CheckInterval + tick

// budgetWait is a warned wait not yet ended: the oldest shard waiting since
// from, as incarnation inc's warning said; pace is the most time its slow
// output's step needs for the batches the warning said were in the
// pipeline (slowWork).
type budgetWait struct {
	inc  string
	from time.Time
	msg  string
	pace time.Duration
}

// slowWork is the most time the slow step of inc's output (a sleep per
// message) needs for batches of inPipeline bytes: each message costs the
// budget at least budget.RecordOverhead, so they are at most that many
// messages. Zero for an output with no slow step. A pipeline handed one
// large batch acks nothing until its last message is through: seed 15 with
// efo, y11 (7 ms a message) was handed one subscription event of 5,906 KPL
// user records, 6.4 MB of the budget's 2 MiB, and the other 11 shards
// waited for it as long as the pipeline needed for it, about 41 s.
func (s *soak) slowWork(inc string, inPipeline int64) time.Duration {
	s.mu.Lock()
	pace := s.slowPace[inc]
	s.mu.Unlock()
	return time.Duration(inPipeline/budget.RecordOverhead) * pace
}

func (m *monitor) budgetWarning(inc, warning string, line []byte) {
	msg := string(line)
	if i := strings.Index(msg, "msg="); i >= 0 {
		msg = msg[i:]
	}
	if bytes.Contains(line, []byte(budgetWaitOnKinesis)) {
		m.v.BudgetWaitsOnKinesis++
		m.s.note("budget wait of %s behind calls Kinesis did not answer (not the pipeline; not a breach): %s", inc, msg)
		return
	}
	at := lineTime(line)
	held, ok := heldFor(line)
	if warning != budgetWaitWarnings[0] || !ok {
		m.v.BudgetWaits++
		m.fail("budget wait", "%s: %s", inc, msg)
		return
	}
	w := &budgetWait{inc: inc, from: at.Add(-held), msg: msg, pace: m.s.slowWork(inc, inPipeline(line))}
	if withheld, _ := m.s.withheldFor(inc, w.from, at); withheld == 0 && w.pace == 0 {
		// The input warns past the bound: nothing withheld, no slow step,
		// a breach.
		m.v.BudgetWaits++
		m.fail("budget wait", "%s: no fault withheld its deliveries during the wait, and its output has no slow step: %s", inc, msg)
		return
	}
	if !m.judgeWait(w, at, false) {
		m.waits[inc] = w
	}
}

// judgeWait judges w as it stood at end (final: the wait ended then). The
// time in it when a fault withheld the incarnation's deliveries is not
// the pipeline's (withholdings); the rest must stay within
// budgetWaitBound. It says whether w is judged for good.
func (m *monitor) judgeWait(w *budgetWait, end time.Time, final bool) bool {
	waited := end.Sub(w.from)
	withheld, by := m.s.withheldFor(w.inc, w.from, end)
	if outside := waited - withheld - w.pace; outside > budgetWaitBound {
		m.v.BudgetWaits++
		m.fail("budget wait", "%s: waited %v by the time of this check, %v of it outside faults that withheld its deliveries (%s) and the slow output's %v for what was in the pipeline: %s",
			w.inc, waited.Round(time.Second), outside.Round(time.Second), orNone(by), w.pace, w.msg)
		return true
	}
	if !final {
		return false
	}
	m.v.BudgetWaitsExcused++
	m.s.note("budget wait of %s: %v, of which %v under faults that withheld its deliveries (%s) and up to %v the slow output's pace for what was in the pipeline; %v outside them, within %v (not a breach): %s",
		w.inc, waited.Round(time.Second), withheld.Round(100*time.Millisecond), orNone(by), w.pace, (waited - withheld - w.pace).Round(100*time.Millisecond), budgetWaitBound, w.msg)
	return true
}

var inPipelineRE = regexp.MustCompile(budget.InPipelineField + `=(\d+)`)

// inPipeline is what the warning says was handed to the pipeline (0 when
// it does not say).
func inPipeline(line []byte) int64 {
	m := inPipelineRE.FindSubmatch(line)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

func orNone(whats []string) string {
	if len(whats) == 0 {
		return "none"
	}
	return strings.Join(whats, ", ")
}

var (
	lineTimeRE = regexp.MustCompile(`time="([^"]+)"`)
	heldForRE  = regexp.MustCompile(`has held shards back for ([0-9hms.]+),`)
)

// lineTime is the time a log line was written (to the second), or now if
// it does not say.
func lineTime(line []byte) time.Time {
	if m := lineTimeRE.FindSubmatch(line); m != nil {
		if t, err := time.Parse(time.RFC3339, string(m[1])); err == nil {
			return t
		}
	}
	return time.Now()
}

// heldFor is how long the oldest shard had waited when the warning was
// written.
func heldFor(line []byte) (time.Duration, bool) {
	m := heldForRE.FindSubmatch(line)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(string(m[1]))
	return d, err == nil
}
