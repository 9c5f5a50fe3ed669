package input

import (
	"context"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/lintrule"
)

// redeliveryEnv registers a test input holding only the policy, with its
// checks, in an environment of its own.
func redeliveryEnv(t *testing.T) (*service.Environment, *service.ConfigSpec) {
	t.Helper()
	spec := service.NewConfigSpec().Field(redeliveryField()).LintRule(lintrule.Mapping(redeliveryLintChecks()...))
	env := service.NewEnvironment()
	require.NoError(t, env.RegisterBatchInput("redelivery_test", spec, func(*service.ParsedConfig, *service.Resources) (service.BatchInput, error) {
		return nil, nil
	}))
	return env, spec
}

func TestRedeliveryParsesAndRefusesWhatLintRefuses(t *testing.T) {
	env, spec := redeliveryEnv(t)
	for name, tc := range map[string]struct {
		yaml string
		want Redelivery
		err  string
	}{
		"absent: retry forever":  {"", Redelivery{Isolate: true, Mark: true}, ""},
		"defaults":               {"redelivery: {}", Redelivery{Isolate: true, Mark: true}, ""},
		"attempts and a dlq":     {"redelivery: { max_attempts: 5, dead_letter: dlq }", Redelivery{MaxAttempts: 5, Isolate: true, DeadLetter: "dlq", Mark: true}, ""},
		"age and a dlq":          {"redelivery: { max_record_age: 24h, isolate: false, dead_letter: dlq }", Redelivery{MaxRecordAge: 24 * time.Hour, DeadLetter: "dlq", Mark: true}, ""},
		"no mark":                {"redelivery: { mark: false }", Redelivery{Isolate: true}, ""},
		"attempts without a dlq": {"redelivery: { max_attempts: 3 }", Redelivery{}, "field redelivery.max_attempts: a record that used its attempts or grew too old would have nowhere to go, and records are never dropped; set redelivery.dead_letter to the label of an output resource, or remove max_attempts"},
		"age without a dlq":      {"redelivery: { max_record_age: 1h }", Redelivery{}, "field redelivery.max_record_age: a record that used its attempts or grew too old would have nowhere to go"},
		"a dlq never used":       {"redelivery: { dead_letter: dlq }", Redelivery{}, "field redelivery.dead_letter: nothing would ever be written to it; set redelivery.max_attempts or redelivery.max_record_age, or remove redelivery.dead_letter"},
		"negative attempts":      {"redelivery: { max_attempts: -1, dead_letter: dlq }", Redelivery{}, "field redelivery.max_attempts: -1 must be 0 (retry forever) or more"},
		"age not a duration":     {"redelivery: { max_record_age: a day, dead_letter: dlq }", Redelivery{}, `field redelivery.max_record_age: "a day" is not a duration; write it like 24h`},
		"age zero":               {"redelivery: { max_record_age: 0s, dead_letter: dlq }", Redelivery{}, "field redelivery.max_record_age: 0s must be above 0"},
		"age past any retention": {"redelivery: { max_record_age: 9000h, dead_letter: dlq }", Redelivery{}, "field redelivery.max_record_age: 9000h0m0s is at or above the longest retention"},
	} {
		t.Run(name, func(t *testing.T) {
			doc := "{ " + tc.yaml + " }"
			lints, err := env.NewComponentConfigLinter().LintInputYAML([]byte("redelivery_test: " + doc))
			require.NoError(t, err)
			conf, err := spec.ParseYAML(doc, env)
			require.NoError(t, err)
			got, err := RedeliveryFromParsed(conf)
			if tc.err == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				assert.Empty(t, lints)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err, "the constructor names the field and the fix")
			require.Len(t, lints, 1, "lint says the same: %v", lints)
			want := tc.err
			if name == "age past any retention" {
				want = "field redelivery.max_record_age: 9000h is at or above the longest retention" // lint quotes the text as written
			}
			assert.Contains(t, lints[0].What, want)
		})
	}
}

// A dead_letter naming no output resource is refused at connect, naming the
// label; one that exists passes. Resources come from a real stream.
func TestRedeliveryDeadLetterMustBeAnOutputResource(t *testing.T) {
	var found, missing error
	env := service.NewEnvironment()
	spec := service.NewConfigSpec().Field(service.NewStringField("x").Default(""))
	require.NoError(t, env.RegisterBatchInput("dlq_probe", spec, func(_ *service.ParsedConfig, mgr *service.Resources) (service.BatchInput, error) {
		found = Redelivery{MaxAttempts: 1, DeadLetter: "dlq"}.CheckDeadLetter(mgr)
		missing = Redelivery{MaxAttempts: 1, DeadLetter: "dlx"}.CheckDeadLetter(mgr)
		return service.AutoRetryNacksBatched(emptyInput{}), nil
	}))
	b := env.NewStreamBuilder()
	require.NoError(t, b.SetYAML(`
input:
  dlq_probe: {}
output:
  drop: {}
output_resources:
  - label: dlq
    drop: {}
`))
	s, err := b.Build()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Run(ctx))
	assert.NoError(t, found)
	require.Error(t, missing)
	assert.Contains(t, missing.Error(), `field redelivery.dead_letter: no output resource is labelled "dlx"`)
}

type emptyInput struct{}

func (emptyInput) Connect(context.Context) error { return nil }
func (emptyInput) ReadBatch(context.Context) (service.MessageBatch, service.AckFunc, error) {
	return nil, nil, service.ErrEndOfInput
}
func (emptyInput) Close(context.Context) error { return nil }
