package chaos

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/connect-kinesis/connect-kinesis/internal/consumer/budget"
)

// The input logs a warning when a shard has waited for the byte budget
// longer than lag_warn_threshold (the soak sets it to budgetWaitBound), and
// another when the budget has let no shard in for a minute, which only a
// pipeline that stops acking can cause. The soak's pipelines ack all along
// (a file, a slow step, some nacks), so either warning breaks the
// invariant "no shard waits for the budget longer than the bound while the
// pipeline acks".
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

// budgetWaits checks the instances' new log lines for a budget warning.
func (m *monitor) budgetWaits() error {
	var logs []string
	for _, out := range m.s.outputFiles() {
		logs = append(logs, strings.TrimSuffix(out, ".jsonl")+".log")
	}
	return m.logs.lines(logs, func(path string, line []byte) {
		for _, w := range budgetWaitWarnings {
			if bytes.Contains(line, []byte(w)) {
				inc := strings.TrimSuffix(filepath.Base(path), ".log")
				msg := string(line)
				if i := strings.Index(msg, "msg="); i >= 0 {
					msg = msg[i:]
				}
				if bytes.Contains(line, []byte(budgetWaitOnKinesis)) {
					m.v.BudgetWaitsOnKinesis++
					m.s.note("budget wait of %s behind calls Kinesis did not answer (not the pipeline; not a breach): %s", inc, msg)
					return
				}
				m.v.BudgetWaits++
				m.fail("budget wait", "%s: %s", inc, msg)
				return
			}
		}
	})
}
