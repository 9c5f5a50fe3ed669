package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestOperatingDocSaysWhatToDoOnEveryAlert guards against an alert rule
// that docs/operating.md's table leaves out: KinesisRecordsDeadLettered was
// in config/alerts but in neither page's alert table, so whoever it paged
// found no row saying what to do. Each rule must have a row there, with its
// severity as the rules file gives it.
func TestOperatingDocSaysWhatToDoOnEveryAlert(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "alerts", "kinesis.rules.yaml"))
	require.NoError(t, err)
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert  string            `yaml:"alert"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rules))
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	require.NoError(t, err)
	var n int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(r.Alert) + "` \\(([a-z]+)\\) \\|").FindStringSubmatch(string(doc))
			if assert.NotNil(t, row, "docs/operating.md has no row for the alert %s in its table of what to do", r.Alert) {
				assert.Equal(t, r.Labels["severity"], row[1], "docs/operating.md gives %s another severity than the rules", r.Alert)
			}
		}
	}
	require.Positive(t, n, "no alert rules read")
	assert.Equal(t, n, strings.Count(string(doc), "| `Kinesis"), "docs/operating.md's alert table has as many rows as the rules define alerts")
}
