package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// Calls to a real Prometheus server's HTTP API, shared by the tests that
// run one (the alert rules, the dashboard).

// promGet decodes the JSON answer of a GET to Prometheus' HTTP API. It
// returns errors rather than failing the test: it runs inside
// require.Eventually's condition, on another goroutine. A refused request
// (a query that does not parse) returns Prometheus' own error text.
func promGet(ctx context.Context, u string, into any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var refusal struct {
			Error string `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &refusal) == nil && refusal.Error != "" {
			return fmt.Errorf("GET %s: %s: %s", u, resp.Status, refusal.Error)
		}
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// promSeriesCount runs an instant query and returns how many series it
// returned.
func promSeriesCount(ctx context.Context, prom *testenv.Prometheus, expr string) (int, error) {
	var body struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := promGet(ctx, prom.URL+"/api/v1/query?query="+url.QueryEscape(expr), &body); err != nil {
		return 0, err
	}
	return len(body.Data.Result), nil
}

// promLabelValues returns the values label takes in the series match
// selects, as Grafana's label_values(match, label) lists them.
func promLabelValues(ctx context.Context, prom *testenv.Prometheus, match, label string) ([]string, error) {
	var body struct {
		Data []string `json:"data"`
	}
	u := prom.URL + "/api/v1/label/" + url.PathEscape(label) + "/values?match[]=" + url.QueryEscape(match)
	if err := promGet(ctx, u, &body); err != nil {
		return nil, err
	}
	return body.Data, nil
}
