//go:build mutant

package checkpointer

import (
	"fmt"
	"os"
	"strings"
)

// MutantEnv names the guard a `mutant` build switches off (`make
// simulate-mutants`): one of the keys of luaMutants, or a Go guard another
// package reads from the same variable.
const MutantEnv = "CONNECT_KINESIS_MUTANT"

// luaMutants are the guards of the scripts a mutant build can switch off:
// per guard, the script and the exact text replaced. A replacement whose
// text is not found panics, so a guard that moved is noticed, not silently
// left on.
var luaMutants = map[string]struct{ script, from, to string }{
	// The commit's fencing: a commit lands whoever holds the lease.
	"commit-fencing": {"commit", "if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then", "if false then"},
	// The checkpoint never moves backwards: a commit of an older position
	// replaces a newer one.
	"commit-forwards": {"commit", "if ok and cmp_pos(ARGV[4], cur) <= 0 then", "if false then"},
	// The tie rule: an equal token of another owner, handed out from the
	// group record a re-seed replaced, stays with that owner.
	"reseed-tie": {"reseed", "or (won and tok <= want)", "or (won and tok < want)"},
	// The holder's claim after a wipe: a holder of the kept group record no
	// longer wins back a shard a newcomer took, read or closed under the
	// record its re-seed replaced.
	"reseed-claim": {"reseed", "elseif won and prov[ARGV[j]] and owner ~= ARGV[3] and not pruned(ARGV[j]) then", "elseif false then"},
	// Both: the two guards cover each other (a newcomer's token after a
	// wipe starts again at 1, so the tie rule wins back most provisional
	// shards too), and each alone survives the simulation.
	"reseed-tie-claim": {"reseed", "elseif won and prov[ARGV[j]] and owner ~= ARGV[3] and not pruned(ARGV[j]) then", "elseif false then"},
	// The redelivery mark's fencing: any instance raises the mark.
	"mark-fencing": {"delivered", "if not held(leases[j], ARGV[i + 1]) then", "if false then"},
	// The lease rule in a batched take: a shard after the first of one
	// call is taken over a live lease. The text takes the line before it
	// along, as the prelude's refuse_live holds the same test.
	"take-live": {"acquire", "  local took = 1\n  if live(owner, exp, now) then", "  local took = 1\n  if live(owner, exp, now) and i == 6 then"},
	// The close's fencing: a close by an instance that lost the lease lands.
	"close-fencing": {"close", "if owner ~= ARGV[2] or tok ~= tonumber(ARGV[3]) then return 0 end", ""},
}

func mutate(name, src string) string {
	m, ok := luaMutants[os.Getenv(MutantEnv)]
	if !ok || m.script != name {
		return src
	}
	if !strings.Contains(src, m.from) {
		panic(fmt.Sprintf("mutant %s: %q not found in %s.lua", os.Getenv(MutantEnv), m.from, name))
	}
	src = strings.Replace(src, m.from, m.to, 1)
	if os.Getenv(MutantEnv) == "reseed-tie-claim" {
		t := luaMutants["reseed-tie"]
		if !strings.Contains(src, t.from) {
			panic(fmt.Sprintf("mutant reseed-tie-claim: %q not found in reseed.lua", t.from))
		}
		src = strings.Replace(src, t.from, t.to, 1)
	}
	return src
}
