package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Node server that cannot bind one of its ports logs EADDRINUSE and goes
// on running (kinesis-mock does, with its other port served). Its start
// must end at once as a retryable early exit, not wait out the minute.
func TestAServerThatFoundItsPortTakenIsStartedAgain(t *testing.T) {
	attempts := 0
	var last *Process
	_, err := retryStart(func() (*Process, error) {
		attempts++
		p, err := startProcess("port-taken", nil, "", "sh", "-c",
			`echo "Error: listen EADDRINUSE: address already in use :::42275"; exec sleep 120`)
		if err != nil {
			return nil, err
		}
		last = p
		return p, waitReady(context.Background(), p, time.Minute, func(context.Context) error {
			return errors.New("not serving")
		})
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, errExitedEarly, "a taken port is worth a start on new ports")
	assert.Equal(t, startAttempts, attempts, "every attempt was made")
	assert.True(t, last.Exited(), "the server that found its port taken is stopped, not left running")
}
