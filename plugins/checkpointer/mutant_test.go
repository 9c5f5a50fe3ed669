//go:build mutant

package checkpointer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestEachLuaMutantSwitchesOffItsOwnGuard guards mutants that switch off
// nothing: a mutant replaces the first occurrence of its text in the
// script's whole source, the shared prelude included, so a text the
// prelude also holds mutates a prelude function the body may never call
// (take-live's `if live(owner, exp, now) then` first matched reset's
// refuse_live), and the simulation then passes for want of a defect.
func TestEachLuaMutantSwitchesOffItsOwnGuard(t *testing.T) {
	for name, m := range luaMutants {
		src := "\n" + luaPrelude + "\n" + luaFields.Replace(readLua(m.script))
		assert.Equal(t, 1, strings.Count(src, m.from), "mutant %s: its text must occur once in %s.lua with the prelude, or another guard is switched off", name, m.script)
		body := luaFields.Replace(readLua(m.script))
		assert.Equal(t, 1, strings.Count(body, m.from), "mutant %s: its text must be the body's of %s.lua, not the prelude's", name, m.script)
	}
}
