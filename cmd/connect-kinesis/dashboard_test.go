package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/metricsdoc"
)

// dashboardFile is the Grafana dashboard docs/operating.md tells users to
// import.
const dashboardFile = "../../config/dashboards/kinesis.json"

// dashboardDatasource is the datasource every panel and query variable
// names: the dashboard's own `datasource` variable, so one import works
// against whatever Prometheus the user picks.
const dashboardDatasource = "${datasource}"

// The parts of Grafana's dashboard JSON model the tests look at.
type (
	grafanaDashboard struct {
		UID           string `json:"uid"`
		Title         string `json:"title"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []grafanaVariable `json:"list"`
		} `json:"templating"`
		Panels []grafanaPanel `json:"panels"`
	}
	grafanaVariable struct {
		Name       string             `json:"name"`
		Type       string             `json:"type"`
		Query      json.RawMessage    `json:"query"`
		Definition string             `json:"definition"`
		Datasource *grafanaDatasource `json:"datasource"`
		IncludeAll bool               `json:"includeAll"`
		AllValue   string             `json:"allValue"`
	}
	grafanaDatasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	}
	grafanaPanel struct {
		ID         int                `json:"id"`
		Type       string             `json:"type"`
		Title      string             `json:"title"`
		Datasource *grafanaDatasource `json:"datasource"`
		GridPos    struct{ H, W, X, Y int }
		Targets    []grafanaTarget `json:"targets"`
		// Panels holds a collapsed row's panels.
		Panels []grafanaPanel `json:"panels"`
	}
	grafanaTarget struct {
		RefID      string             `json:"refId"`
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	}
)

// dashboardQuery is one panel query, with where it sits for messages.
type dashboardQuery struct {
	Row, Panel, RefID, Expr string
}

func (q dashboardQuery) String() string {
	return fmt.Sprintf("row %q, panel %q, query %s", q.Row, q.Panel, q.RefID)
}

func loadDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal(b, &d), "%s is Grafana dashboard JSON", dashboardFile)
	return d
}

// walk calls fn for every panel that is not a row, with the title of the row
// above it, whether the row is open (panels follow it) or collapsed (panels
// inside it).
func (d grafanaDashboard) walk(fn func(row string, p grafanaPanel)) {
	row := ""
	for _, p := range d.Panels {
		if p.Type != "row" {
			fn(row, p)
			continue
		}
		row = p.Title
		for _, inner := range p.Panels {
			fn(row, inner)
		}
	}
}

func (d grafanaDashboard) queries() []dashboardQuery {
	var out []dashboardQuery
	d.walk(func(row string, p grafanaPanel) {
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{Row: row, Panel: p.Title, RefID: tg.RefID, Expr: tg.Expr})
		}
	})
	return out
}

func (d grafanaDashboard) rows() []string {
	var out []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Title)
		}
	}
	return out
}

// dashboardRateInterval stands in for Grafana's $__rate_interval when a test
// sends a query to Prometheus: four scrapes at the tests' 1s interval.
const dashboardRateInterval = "4s"

var dashboardVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// substituteVariables does what Grafana does to a query before sending it,
// with every template variable at "All" (its allValue, `.*`). It fails on a
// variable the dashboard does not define.
func substituteVariables(expr string, defined []string) (string, error) {
	var err error
	out := dashboardVariable.ReplaceAllStringFunc(expr, func(m string) string {
		name := dashboardVariable.FindStringSubmatch(m)[1]
		switch {
		case name == "__rate_interval":
			return dashboardRateInterval
		case slices.Contains(defined, name):
			return ".*"
		}
		err = fmt.Errorf("unknown variable %s in %q", m, expr)
		return m
	})
	return out, err
}

func (d grafanaDashboard) variableNames() []string {
	var out []string
	for _, v := range d.Templating.List {
		out = append(out, v.Name)
	}
	return out
}

// variableQuery is a query variable's label_values(match, label).
var variableQuery = regexp.MustCompile(`^label_values\((.*), *(\w+)\)$`)

var (
	metricName = regexp.MustCompile(`\bkinesis_\w+`)
	byLabels   = regexp.MustCompile(`\bby *\(([^)]*)\)`)
	// A variable must be matched as a regex (=~): its "All" is `.*` and a
	// multi-value selection is `a|b`.
	variableNotRegex = regexp.MustCompile(`[^~]"\$`)
	// rangeWindow is a range selector's window, which is Grafana's
	// $__rate_interval: at least four scrapes whatever the scrape interval
	// and the zoom.
	rangeWindow = regexp.MustCompile(`\[[^\]]*\]`)
)

// documentedMetrics maps each metric's name in a scrape (timers' with the
// summary's and histogram's suffixes too) to its labels.
func documentedMetrics() map[string][]string {
	out := map[string][]string{}
	for _, m := range slices.Concat(metricsdoc.Input, metricsdoc.Output) {
		n := m.PrometheusName()
		out[n] = m.Labels
		if m.Type == metricsdoc.Timer {
			for _, suffix := range []string{"_sum", "_count", "_bucket"} {
				out[n+suffix] = m.Labels
			}
		}
	}
	return out
}

// TestDashboardModel checks config/dashboards/kinesis.json without Grafana:
// it parses, each panel and query variable uses the datasource variable,
// ids are unique, every query's metrics are ones the plugins emit (so a
// renamed metric fails here) and its `by` labels are theirs, every metric
// the plugins emit has a panel, and docs/operating.md describes every row.
func TestDashboardModel(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	assert.NotEmpty(t, d.UID)
	assert.NotEmpty(t, d.Title)
	assert.GreaterOrEqual(t, d.SchemaVersion, 36)

	vars := map[string]grafanaVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	require.Contains(t, vars, "datasource")
	assert.Equal(t, "datasource", vars["datasource"].Type)
	assert.JSONEq(t, `"prometheus"`, string(vars["datasource"].Query))
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if assert.NotNil(t, v.Datasource, "variable %s", v.Name) {
			assert.Equal(t, dashboardDatasource, v.Datasource.UID, "variable %s", v.Name)
		}
		assert.True(t, v.IncludeAll, "variable %s offers All", v.Name)
		assert.Equal(t, ".*", v.AllValue, "variable %s: All is a regex matching every value", v.Name)
		assert.Regexp(t, variableQuery, v.Definition, "variable %s", v.Name)
	}

	metrics := documentedMetrics()
	used := map[string]bool{}
	ids := map[int]string{}
	check := func(p grafanaPanel) {
		if prev, ok := ids[p.ID]; assert.False(t, ok, "panel %q has the id of %q", p.Title, prev) {
			ids[p.ID] = p.Title
		}
		assert.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q fits the 24-column grid", p.Title)
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			check(p)
		}
	}
	d.walk(func(row string, p grafanaPanel) {
		check(p)
		if assert.NotNil(t, p.Datasource, "panel %q", p.Title) {
			assert.Equal(t, dashboardDatasource, p.Datasource.UID, "panel %q", p.Title)
		}
		assert.NotEmpty(t, p.Targets, "panel %q has a query", p.Title)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			q := dashboardQuery{Row: row, Panel: p.Title, RefID: tg.RefID, Expr: tg.Expr}
			assert.False(t, refs[tg.RefID], "%s: refId used twice", q)
			refs[tg.RefID] = true
			if assert.NotNil(t, tg.Datasource, "%s", q) {
				assert.Equal(t, dashboardDatasource, tg.Datasource.UID, "%s", q)
			}
			_, err := substituteVariables(tg.Expr, d.variableNames())
			assert.NoError(t, err, "%s", q)
			assert.NotRegexp(t, variableNotRegex, tg.Expr, "%s: match variables with =~", q)
			for _, w := range rangeWindow.FindAllString(tg.Expr, -1) {
				assert.Equal(t, "[$__rate_interval]", w, "%s: a range over $__rate_interval", q)
			}
			names := metricName.FindAllString(tg.Expr, -1)
			assert.NotEmpty(t, names, "%s queries a kinesis_* metric", q)
			labels := []string{"job", "instance", "le"}
			for _, n := range names {
				l, ok := metrics[n]
				assert.True(t, ok, "%s: %s is not a metric the plugins emit (internal/metricsdoc)", q, n)
				labels = append(labels, l...)
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_sum"), "_count"), "_bucket")] = true
			}
			for _, m := range byLabels.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					assert.Contains(t, labels, strings.TrimSpace(l), "%s: aggregates by a label its metrics do not have", q)
				}
			}
		}
	})
	for _, m := range slices.Concat(metricsdoc.Input, metricsdoc.Output) {
		assert.True(t, used[m.PrometheusName()], "metric %s has no panel", m.PrometheusName())
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operating.md"))
	require.NoError(t, err)
	require.NotEmpty(t, d.rows())
	for _, row := range d.rows() {
		assert.True(t, strings.Contains(string(doc), "**"+row+"**"), "docs/operating.md describes the row %q (in bold)", row)
	}
}

// The integration test sends each side of a query's top-level `or` on its
// own; an `or` inside a function call or a label value is not split.
func TestSplitTopLevelOr(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`a`:                                  {`a`},
		`max(a{q="x or y"}) or sum(b)`:       {`max(a{q="x or y"})`, `sum(b)`},
		`sum(a or b)`:                        {`sum(a or b)`},
		`a or b or histogram_quantile(1, c)`: {`a`, `b`, `histogram_quantile(1, c)`},
		`a{l=~"\" or "} or b`:                {`a{l=~"\" or "}`, `b`},
		`label_replace(a, "x", "y or z", "", "") or b`: {`label_replace(a, "x", "y or z", "", "")`, `b`},
	} {
		assert.Equal(t, want, splitTopLevelOr(expr), expr)
	}
}

// The breakdowns operators asked for: failed messages by reason, the
// checkpoint panels per stream (filtered by the stream variable), and the
// commit latency next to them.
func TestDashboardOperatorBreakdowns(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	byMetric := map[string][]dashboardQuery{}
	for _, q := range d.queries() {
		for _, n := range metricName.FindAllString(q.Expr, -1) {
			byMetric[n] = append(byMetric[n], q)
		}
	}
	groups := func(q dashboardQuery) []string {
		var out []string
		for _, m := range byLabels.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				out = append(out, strings.TrimSpace(l))
			}
		}
		return out
	}
	for metric, label := range map[string]string{
		"kinesis_output_failed_total":      "reason",
		"kinesis_checkpoint_commits_total": "stream",
		"kinesis_checkpoint_errors_total":  "stream",
	} {
		require.NotEmpty(t, byMetric[metric], "a panel shows %s", metric)
		for _, q := range byMetric[metric] {
			assert.Contains(t, groups(q), label, "%s: %s broken down by %s", q, metric, label)
			assert.Contains(t, q.Expr, `stream=~"$stream"`, "%s: filtered by the stream variable", q)
		}
	}
	latency := append(byMetric["kinesis_checkpoint_commit_latency_seconds_sum"], byMetric["kinesis_checkpoint_commit_latency_seconds"]...)
	require.NotEmpty(t, latency, "a panel shows the checkpoint commit latency")
	for _, q := range latency {
		assert.Equal(t, "Checkpoints", q.Row, "%s: with the other checkpoint panels", q)
	}
}
