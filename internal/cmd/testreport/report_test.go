package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stream with a passing, a failing (interleaved with a parallel test), a
// skipped and a slow test, one package that passes and one that fails.
const stream = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestFast"}
{"Action":"output","Package":"ex/a","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Action":"run","Package":"ex/a","Test":"TestBroken"}
{"Action":"output","Package":"ex/a","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}
{"Action":"output","Package":"ex/a","Test":"TestFast","Output":"    fast_test.go:9: chatter\n"}
{"Action":"output","Package":"ex/a","Test":"TestBroken","Output":"    broken_test.go:12: want 1, got 2\n"}
{"Action":"output","Package":"ex/a","Test":"TestFast","Output":"--- PASS: TestFast (0.10s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestFast","Elapsed":0.1}
{"Action":"output","Package":"ex/a","Test":"TestBroken","Output":"--- FAIL: TestBroken (2.50s)\n"}
{"Action":"fail","Package":"ex/a","Test":"TestBroken","Elapsed":2.5}
{"Action":"output","Package":"ex/a","Output":"FAIL\n"}
{"Action":"output","Package":"ex/a","Output":"FAIL\tex/a\t2.6s\n"}
{"Action":"fail","Package":"ex/a","Elapsed":2.6}
{"Action":"run","Package":"ex/b","Test":"TestSlow"}
{"Action":"run","Package":"ex/b","Test":"TestSlow/sub"}
{"Action":"pass","Package":"ex/b","Test":"TestSlow/sub","Elapsed":40}
{"Action":"pass","Package":"ex/b","Test":"TestSlow","Elapsed":41.2}
{"Action":"skip","Package":"ex/b","Test":"TestNoRedis","Elapsed":0}
{"Action":"output","Package":"ex/b","Output":"PASS\n"}
{"Action":"output","Package":"ex/b","Output":"ok  \tex/b\t41.3s\n"}
{"Action":"pass","Package":"ex/b","Elapsed":41.3}
`

func TestReportPrintsFailuresSlowestAndCounts(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	require.NoError(t, r.read(strings.NewReader(stream)))
	assert.False(t, r.summary(10), "a failed test fails the run")

	got := out.String()
	assert.Contains(t, got, "broken_test.go:12: want 1, got 2\n--- FAIL: TestBroken (2.50s)\n")
	assert.NotContains(t, got, "chatter", "a passing test's output stays quiet")
	assert.NotContains(t, got, "=== RUN")
	assert.Contains(t, got, "FAIL\tex/a\t2.6s\n")
	assert.Contains(t, got, "ok  \tex/b\t41.3s\n")
	slow := got[strings.Index(got, "The 4 slowest tests:"):]
	assert.Regexp(t, `^The 4 slowest tests:\n\s+41\.2s  TestSlow  ex/b\n\s+40\.0s  TestSlow/sub  ex/b\n\s+2\.5s  TestBroken  ex/a\n\s+0\.1s  TestFast  ex/a\n`, slow)
	assert.True(t, strings.HasSuffix(got, "\n3 passed, 1 failed, 1 skipped\n"), got)
	assert.NotContains(t, got, "outside a test", "the package failed because of its test")
}

func TestReportFailsOnBuildErrorsAndPanics(t *testing.T) {
	for name, tc := range map[string]struct{ stream, want string }{
		"build error": {
			stream: `{"ImportPath":"ex/c [ex/c.test]","Action":"build-output","Output":"c_test.go:3:1: syntax error\n"}
{"ImportPath":"ex/c [ex/c.test]","Action":"build-fail"}
{"Action":"output","Package":"ex/c","Output":"FAIL\tex/c [build failed]\n"}
{"Action":"fail","Package":"ex/c","Elapsed":0}
`,
			want: "c_test.go:3:1: syntax error\n",
		},
		"panic in a test": {
			stream: `{"Action":"run","Package":"ex/d","Test":"TestPanics"}
{"Action":"output","Package":"ex/d","Test":"TestPanics","Output":"panic: boom\n"}
{"Action":"output","Package":"ex/d","Output":"FAIL\tex/d\t0.1s\n"}
{"Action":"fail","Package":"ex/d","Elapsed":0.1}
`,
			want: "--- unfinished: TestPanics\npanic: boom\n",
		},
		"go's own message": {
			stream: "go: updates to go.mod needed\n",
			want:   "go: updates to go.mod needed\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			r := newReport(&out)
			require.NoError(t, r.read(strings.NewReader(tc.stream)))
			ok := r.summary(10)
			assert.Contains(t, out.String(), tc.want)
			if name != "go's own message" {
				assert.False(t, ok)
				assert.True(t, strings.HasSuffix(out.String(), "\n0 passed, 0 failed\n"), out.String())
			}
		})
	}
}
