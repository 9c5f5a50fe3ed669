package chaos

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The final check reads the shadow's backlog for as long as each poll
// reads something new: a poll that fails (a deadline on a busy emulator)
// but reads records is tried again, and only three polls in a row that
// read nothing end it with the error. While the soak runs, one poll is
// made and a failed one is the next tick's to retry.
func TestPollShadowReadsABacklogToItsEnd(t *testing.T) {
	slow := errors.New("context deadline exceeded")
	// The first n polls fail; each poll reads grow more records.
	run := func(ctx context.Context, final bool, n, grow int) (polls int, err error) {
		records := 0
		err = pollShadow(ctx, final, func() int { return records }, func() error {
			polls++
			records += grow
			if polls <= n {
				return slow
			}
			return nil
		})
		return polls, err
	}
	polls, err := run(t.Context(), true, 10, 5)
	assert.NoError(t, err, "ten slow polls that each read more, then a good one")
	assert.Equal(t, 11, polls)

	polls, err = run(t.Context(), true, 100, 0)
	assert.ErrorIs(t, err, slow, "polls that read nothing new end the check")
	assert.Equal(t, shadowStallPolls, polls)

	polls, err = run(t.Context(), false, 100, 0)
	assert.NoError(t, err, "while the soak runs, a failed poll is the next tick's")
	assert.Equal(t, 1, polls)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	polls, err = run(ctx, true, 100, 5)
	assert.ErrorIs(t, err, slow, "a soak that is stopped stops polling")
	assert.Equal(t, 1, polls)
}
