package input

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// The `redelivery` policy: what happens to a record the pipeline keeps
// failing (docs/poison-records.md). The shard reader applies it
// (internal/consumer/reader, isolate.go and deadletter.go); the input
// parses and checks it here, and writes the dead letter (deadletter.go).

// Field names of the policy.
const (
	fieldRedelivery   = "redelivery"
	fieldMaxAttempts  = "max_attempts"
	fieldMaxRecordAge = "max_record_age"
	fieldIsolate      = "isolate"
	fieldDeadLetter   = "dead_letter"
	fieldMark         = "mark"
)

// The paths users see in messages.
const (
	pathMaxAttempts  = fieldRedelivery + "." + fieldMaxAttempts
	pathMaxRecordAge = fieldRedelivery + "." + fieldMaxRecordAge
	pathDeadLetter   = fieldRedelivery + "." + fieldDeadLetter
)

// maxRecordAgeLimit is the longest retention Kinesis allows (365 days): a
// limit at or above it never applies.
const maxRecordAgeLimit = 8760 * time.Hour

// Redelivery is the parsed policy. Its zero value, with Isolate true, is
// today's behaviour: a nacked record is delivered again forever.
type Redelivery struct {
	// MaxAttempts is how many failures charged to a record it may have
	// before it goes to the dead letter; 0 retries forever.
	MaxAttempts int
	// MaxRecordAge sends a record older than this, when it would be
	// delivered again, to the dead letter; 0 means no age limit.
	MaxRecordAge time.Duration
	// Isolate halves a batch that failed without naming its messages.
	Isolate bool
	// DeadLetter is the label of an output resource.
	DeadLetter string
	// Mark stores how far each shard may be delivered before it is, so a
	// later owner marks what it reads again (kinesis_redelivered).
	Mark bool
}

// Messages shared by lint and Validate, so both say the same.
const (
	msgNowhereToGo = "a record that used its attempts or grew too old would have nowhere to go, and records are never dropped; set " +
		pathDeadLetter + " to the label of an output resource, or remove %s"
	msgUnusedDeadLetter = "nothing would ever be written to it; set " + pathMaxAttempts + " or " + pathMaxRecordAge + ", or remove " + pathDeadLetter
)

// redeliveryField is the `redelivery` object of the input's spec.
func redeliveryField() *service.ConfigField {
	return service.NewObjectField(fieldRedelivery,
		service.NewIntField(fieldMaxAttempts).
			Description("0 (the default): a failing record is retried forever and its shard waits. Otherwise, how many times a record may fail on its own before it goes to `dead_letter`. See [poison records](../../poison-records.md).").
			LintRule(lintrule.Field(lintrule.Check{
				When:    `this.type() == "number" && this < 0`,
				Message: `"field ` + pathMaxAttempts + `: %v must be 0 (retry forever) or more".format(this)`,
			})).
			Default(0),
		service.NewStringField(fieldMaxRecordAge).
			Description("Empty (the default): no age limit. Else a record older than this when it would be delivered again goes to `dead_letter`, during an outage too. See [poison records](../../poison-records.md#the-policy).").
			LintRule(lintMaxRecordAge).
			Example("24h").
			Default(""),
		service.NewBoolField(fieldIsolate).
			Description("When the pipeline fails a batch without saying which messages failed, split it in halves until the failing records are found. See [poison records](../../poison-records.md#isolating).").
			Default(true),
		service.NewStringField(fieldDeadLetter).
			Description("The label of an output resource that records past `max_attempts` or `max_record_age` are written to, with their metadata and the reason. A record is done only once this write is acknowledged. See [poison records](../../poison-records.md#the-dead-letter).").
			Default(""),
		service.NewBoolField(fieldMark).
			Description("Store how far each shard was delivered (about 50 ms added), so a later owner marks records read again with `kinesis_redelivered: true`. See [poison records](../../poison-records.md#the-redelivery-mark).").
			Default(true),
	).Description("What happens to a record the pipeline keeps failing, and how redeliveries are marked.").Advanced()
}

// lintMaxRecordAge refuses what RedeliveryFromParsed refuses.
var lintMaxRecordAge = lintrule.Field(
	lintrule.Check{
		When:    `this.type() == "string" && this != "" && this.parse_duration().catch(null) == null`,
		Message: `"field ` + pathMaxRecordAge + `: %q is not a duration; write it like 24h (units: ms, s, m, h), or leave it empty for no age limit".format(this)`,
	},
	lintrule.Check{
		When:    `this.type() == "string" && this != "" && this.parse_duration().catch(null) != null && this.parse_duration() <= 0`,
		Message: `"field ` + pathMaxRecordAge + `: %s must be above 0; leave it empty for no age limit".format(this)`,
	},
	lintrule.Check{
		When:    `this.type() == "string" && this != "" && this.parse_duration().catch(0) >= ` + strconv.FormatInt(maxRecordAgeLimit.Nanoseconds(), 10),
		Message: `"field ` + pathMaxRecordAge + `: %s is at or above the longest retention of a stream (8760h), so it never applies; leave it empty for no age limit".format(this)`,
	},
)

// redeliveryLintChecks are the policy's checks across its fields, for the
// input's rule (lintRule), where `this` is the input's block.
func redeliveryLintChecks() []lintrule.Check {
	attempts := `this.` + fieldRedelivery + `.` + fieldMaxAttempts + `.or(0)`
	age := `this.` + fieldRedelivery + `.` + fieldMaxRecordAge + `.or("")`
	dlq := `this.` + fieldRedelivery + `.` + fieldDeadLetter + `.or("")`
	return []lintrule.Check{
		{
			When:    attempts + ` > 0 && ` + dlq + ` == ""`,
			Message: `"field ` + pathMaxAttempts + `: ` + fmt.Sprintf(msgNowhereToGo, fieldMaxAttempts) + `"`,
		},
		{
			When:    age + ` != "" && ` + dlq + ` == ""`,
			Message: `"field ` + pathMaxRecordAge + `: ` + fmt.Sprintf(msgNowhereToGo, fieldMaxRecordAge) + `"`,
		},
		{
			When:    dlq + ` != "" && ` + attempts + ` == 0 && ` + age + ` == ""`,
			Message: `"field ` + pathDeadLetter + `: ` + msgUnusedDeadLetter + `"`,
		},
	}
}

// RedeliveryFromParsed reads the `redelivery` object of a config whose spec
// holds redeliveryField, and validates it.
func RedeliveryFromParsed(conf *service.ParsedConfig) (Redelivery, error) {
	r := Redelivery{Isolate: true, Mark: true}
	if !conf.Contains(fieldRedelivery) {
		return r, nil
	}
	c := conf.Namespace(fieldRedelivery)
	var err error
	if r.MaxAttempts, err = c.FieldInt(fieldMaxAttempts); err != nil {
		return r, err
	}
	age, err := c.FieldString(fieldMaxRecordAge)
	if err != nil {
		return r, err
	}
	if age != "" {
		if r.MaxRecordAge, err = time.ParseDuration(age); err != nil {
			return r, fmt.Errorf("field %s: %q is not a duration; write it like 24h (units: ms, s, m, h), or leave it empty for no age limit", pathMaxRecordAge, age)
		}
		if r.MaxRecordAge <= 0 {
			return r, fmt.Errorf("field %s: %s must be above 0; leave it empty for no age limit", pathMaxRecordAge, age)
		}
	}
	if r.Isolate, err = c.FieldBool(fieldIsolate); err != nil {
		return r, err
	}
	if r.DeadLetter, err = c.FieldString(fieldDeadLetter); err != nil {
		return r, err
	}
	if r.Mark, err = c.FieldBool(fieldMark); err != nil {
		return r, err
	}
	return r, r.Validate()
}

// Validate checks the policy as lint does, for configs built in code too.
func (r Redelivery) Validate() error {
	switch {
	case r.MaxAttempts < 0:
		return fmt.Errorf("field %s: %d must be 0 (retry forever) or more", pathMaxAttempts, r.MaxAttempts)
	case r.MaxRecordAge < 0:
		return fmt.Errorf("field %s: %v must be above 0; leave it empty for no age limit", pathMaxRecordAge, r.MaxRecordAge)
	case r.MaxRecordAge >= maxRecordAgeLimit:
		return fmt.Errorf("field %s: %v is at or above the longest retention of a stream (8760h), so it never applies; leave it empty for no age limit", pathMaxRecordAge, r.MaxRecordAge)
	case r.MaxAttempts > 0 && r.DeadLetter == "":
		return fmt.Errorf("field %s: "+msgNowhereToGo, pathMaxAttempts, fieldMaxAttempts)
	case r.MaxRecordAge > 0 && r.DeadLetter == "":
		return fmt.Errorf("field %s: "+msgNowhereToGo, pathMaxRecordAge, fieldMaxRecordAge)
	case r.DeadLetter != "" && r.MaxAttempts == 0 && r.MaxRecordAge == 0:
		return fmt.Errorf("field %s: %s", pathDeadLetter, msgUnusedDeadLetter)
	}
	return nil
}

// Enabled reports whether records may go to the dead letter at all.
func (r Redelivery) Enabled() bool { return r.MaxAttempts > 0 || r.MaxRecordAge > 0 }

// CheckDeadLetter reports a dead_letter that names no output resource, for
// Connect: lint cannot see resources defined in other files.
func (r Redelivery) CheckDeadLetter(mgr *service.Resources) error {
	if r.DeadLetter == "" || mgr.HasOutput(r.DeadLetter) {
		return nil
	}
	return fmt.Errorf("field %s: no output resource is labelled %q; add one under output_resources with that label, or name an existing one", pathDeadLetter, r.DeadLetter)
}
