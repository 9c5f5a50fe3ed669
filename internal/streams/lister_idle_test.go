package streams

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/kinesisx"
)

// A Lister's listings come a discovery interval apart, and each keeps
// ListStreams within 5 calls a second, the second as the first: the
// listing pace, idle between them, lets no burst through when the next
// listing starts. A time.Ticker left unread gives its next receiver a
// stale tick at once and its following tick at its own phase, which may
// be a moment later: 6 pages within 881 ms.
func TestListerKeepsListStreamsUnderTheLimitAfterAnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var names []string
		for i := range 20 {
			names = append(names, fmt.Sprintf("s-%03d", i))
		}
		api := &pagedStreams{names: names, summaries: true}
		rules, err := ParseRules([]string{"none-*"}, nil)
		require.NoError(t, err)
		made := time.Now()
		l := NewLister(api, kinesisx.DefaultBackoff)
		for round := range 2 {
			if round > 0 {
				// The next listing, a discovery interval later: a
				// millisecond before one of the pace's ticks.
				time.Sleep(time.Until(made.Add(60*time.Second*11/10/kinesisx.MaxListStreamsPerSecond - time.Millisecond)))
			}
			_, err = l.List(t.Context(), rules)
			require.NoError(t, err)
		}
		calls := api.listCalls
		require.Len(t, calls, 20)
		for i := range calls {
			if j := i + kinesisx.MaxListStreamsPerSecond; j < len(calls) && calls[j].Sub(calls[i]) < time.Second {
				t.Errorf("ListStreams calls %d..%d (%d calls) within %v: the account allows %d a second",
					i, j, j-i+1, calls[j].Sub(calls[i]), kinesisx.MaxListStreamsPerSecond)
			}
		}
	})
}
