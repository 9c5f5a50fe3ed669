package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every stream comes first in turn, so a slow stream that uses up a poll's
// time limit cannot leave the same streams unread poll after poll.
func TestShadowPollsStartAtEachStreamInTurn(t *testing.T) {
	refs := []shadowRef{{label: "a"}, {label: "b"}, {label: "c"}}
	firsts := map[string]int{}
	for turn := range 6 {
		order := pollOrder(refs, turn)
		assert.Len(t, order, 3, "every stream in every poll")
		firsts[order[0].label]++
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2}, firsts)
	assert.Empty(t, pollOrder(nil, 3))
}
