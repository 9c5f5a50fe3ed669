package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/connect-kinesis/connect-kinesis/internal/testenv"
)

// upgradeFrom is the previous release, the one docs/deploy.md promises runs
// side by side with this one on a group: move it to the release before
// when a release is cut.
const upgradeFrom = "3038c61a2c626658d02965ad514d057837bdbb9d"

// buildRelease builds the binary of a commit of this repository's history
// into a temporary folder (the shared Go build cache keeps it quick). A
// clone without that commit (a shallow one) skips the test, or fails it
// under CI=true, where the clone must have the history.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	if out, err := exec.CommandContext(t.Context(), "git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		msg := "commit " + commit + " (the previous release) is not in this clone (a shallow clone?); fetch the history (git fetch --unshallow) to run the rolling-upgrade test: " + strings.TrimSpace(string(out))
		if testenv.InCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	src := t.TempDir()
	archive := exec.CommandContext(t.Context(), "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, src)
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "extracting %s: %s", commit, out)
	bin := filepath.Join(t.TempDir(), "connect-kinesis-"+commit[:7])
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/connect-kinesis")
	build.Dir = src
	out, err = build.CombinedOutput()
	require.NoError(t, err, "building %s: %s", commit, out)
	return bin
}

// TestIntegrationRollingUpgrade runs three instances of the previous release
// on a group while records keep arriving, then replaces them one by one
// with this build, as a rolling deployment does: each old instance is
// stopped (SIGTERM: it commits and hands its shards over) and a new one
// started. Nothing is lost and each key stays in order across the mixed
// group; duplicates are reported.
func TestIntegrationRollingUpgrade(t *testing.T) {
	t.Parallel()
	old := buildRelease(t, upgradeFrom)
	const stream = "rolling-upgrade"
	// Six shards over three instances: two each, so each new instance
	// joining two old ones that hold three each is handed its share.
	k, r, store, dir := miSetup(t, stream, 6)
	client := k.Client()
	p := &producer{counter: map[string]int{}}

	// A steady load through the whole upgrade.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.put(t, client, stream, 20)
			}
		}
	})
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	// Deferred, not a cleanup: the load must end before the test's context
	// is cancelled.
	defer stopLoad()

	var all []*instance
	names := []string{"old-a", "old-b", "old-c"}
	for _, name := range names {
		all = append(all, startInstanceOf(t, old, dir, name, k, r, stream, false))
	}
	require.Eventually(t, func() bool { o := owners(t, store); return len(o) == 3 && allEqual(o, 2) }, 90*time.Second, 200*time.Millisecond,
		"the old instances share the shards two each")

	for i, name := range names {
		require.NoError(t, all[i].cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, all[i].cmd.Wait(), "%s stops cleanly", name)
		// The old copy released its leases at the stop rather than leaving
		// them to expire (a reading of an earlier round's notes, that old
		// members hold their leases a lease period): right after it exited,
		// before its replacement starts, only the other copies own shards.
		assert.Len(t, owners(t, store), 2, "%s released its leases at the stop: %s", name, ownerSummary(owners(t, store)))
		newName := "new-" + name[len("old-"):]
		all = append(all, startInstanceOf(t, binary, dir, newName, k, r, stream, false))
		// Owners are instance ids (generated), not these names: the new
		// instance has its share once three owners hold two shards each.
		require.Eventually(t, func() bool {
			o := owners(t, store)
			return len(o) == 3 && allEqual(o, 2)
		}, 90*time.Second, 200*time.Millisecond, "%s takes its share in place of %s", newName, name)
		t.Logf("%s replaced by %s: %s", name, newName, ownerSummary(owners(t, store)))
	}

	stopLoad()
	require.Eventually(t, func() bool {
		u, _, _ := check(deliveries(t, all))
		return u == p.total()
	}, 90*time.Second, 200*time.Millisecond, "every record is delivered")
	unique, dups, violations := check(deliveries(t, all))
	assert.Equal(t, p.total(), unique, "nothing lost")
	assert.Zero(t, violations, "per-key order of first deliveries")
	t.Logf("rolling upgrade from %s: written %d, delivered unique %d, duplicates %d, order violations %d",
		upgradeFrom[:7], p.total(), unique, dups, violations)
	for _, in := range all {
		b, err := os.ReadFile(in.log.Name())
		require.NoError(t, err)
		assert.NotContains(t, string(b), "level=error", "%s logs no error", in.name)
	}
}
