package main

import (
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards field docs that grew into essays (max_buffered_bytes held 518
// words): the docs check names every description over the limit.
func TestDocsCheckFailsALongFieldDescription(t *testing.T) {
	data := service.TemplateDataPlugin{Fields: []service.TemplateDataPluginField{
		{FullName: "short", Description: "Bounds the bytes in flight. See [the guide](x.md)."},
		{FullName: "long", Description: strings.Repeat("word ", maxFieldWords+1)},
		{FullName: "exact", Description: strings.Repeat("word ", maxFieldWords)},
	}}
	assert.Equal(t, []string{"inputs kinesis field long: 81 words"}, longFields("inputs", "kinesis", data))
}

// Guards this project's own specs: every field of the input, the output
// and the metrics exporter stays within the limit, so `make docs-check`
// passes on the committed specs.
func TestFieldDescriptionsWithinTheLimit(t *testing.T) {
	err := run(t.TempDir(), false)
	require.NoError(t, err)
}
