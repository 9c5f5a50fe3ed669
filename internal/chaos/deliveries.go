package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Delivery is one line a consumer instance wrote: a record it handed to its
// pipeline's output, with where it came from and when.
type Delivery struct {
	K     string    `json:"k"`
	C     int       `json:"c"`
	Shard string    `json:"shard"`
	Seq   string    `json:"seq"`
	Inst  string    `json:"inst"`
	At    time.Time `json:"at"`
	// Redelivered is the message's kinesis_redelivered metadata ("true"),
	// "" when the input set none (it sets the key only on a marked
	// record); Attempt its kinesis_delivery_attempt ("1", "2", ...), ""
	// when none.
	Redelivered string `json:"redelivered"`
	Attempt     string `json:"attempt"`
	// Poison says the producer marked the record for the pipeline to
	// reject, always (a poison record).
	Poison bool `json:"poison,omitempty"`
	// DeadLetterReason is set on a line the input's dead letter wrote
	// (kinesis_dead_letter_reason): the record was given up and written
	// there, not delivered.
	DeadLetterReason string `json:"dead_letter_reason,omitempty"`
	// Handover is set on a line of a poison hand-over file
	// (handoverPath): the output rejected the record, handed over by an
	// input whose redelivery.max_attempts was MaxAttempts.
	Handover    bool `json:"handover,omitempty"`
	MaxAttempts int  `json:"max_attempts,omitempty"`
	// Batch is, on a poison record's line, the size of the batch the
	// pipeline got it in (the input's hand-over); 0 when not written.
	Batch int `json:"batch,omitempty"`
}

// ReadDeliveries reads the JSON lines of consumer output files.
func ReadDeliveries(paths ...string) ([]Delivery, error) {
	var all []Delivery
	for _, p := range paths {
		f, err := os.Open(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ds, err := parseDeliveries(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading deliveries of %s: %w", p, err)
		}
		all = append(all, ds...)
	}
	return all, nil
}

func parseDeliveries(r io.Reader) ([]Delivery, error) {
	var out []Delivery
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var d Delivery
		// A SIGKILL can cut the last line short; it was never acked, so it
		// is delivered again by whoever resumes the shard.
		if json.Unmarshal(line, &d) != nil || d.K == "" {
			continue
		}
		out = append(out, d)
	}
	return out, sc.Err()
}
