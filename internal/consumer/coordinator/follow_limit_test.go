package coordinator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every instance adds every stream found, each starting at a place of its
// own: with the same order the last stream waited for every other add at
// every instance before any of them leased its shards.
func TestAddOrderIsARotationOfItsOwnPerInstance(t *testing.T) {
	var found []Found
	for i := range 100 {
		found = append(found, Found{Key: fmt.Sprintf("s%03d", i)})
	}
	firsts := map[string]bool{}
	for _, owner := range []string{"i0", "i1", "i2", "i3"} {
		got := addOrder(found, owner)
		assert.ElementsMatch(t, found, got, "%s adds every stream once", owner)
		assert.Equal(t, addOrder(found, owner), got, "%s's order is stable", owner)
		firsts[got[0].Key] = true
	}
	assert.Greater(t, len(firsts), 1, "instances start in different places")
	assert.Len(t, addOrder(found[:1], "i0"), 1)
}
