package main

import (
	"fmt"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
)

// TestRunEndNeverCallsALostLeaseASuccess: run's exit once CMD exited. A
// lease a renewal found lost is 76 whatever CMD's status. A CMD seen to
// exit after the lease could have run out (no renewal since noticed) is
// 76 too unless the release shows the lease was still held: lost, or a
// release that failed (busy, I/O) and so shows nothing. A CMD that exited
// while the lease was certainly held keeps its status, even when the
// release then finds the lease gone (it ran out after CMD exited).
func TestRunEndNeverCallsALostLeaseASuccess(t *testing.T) {
	lostErr := fmt.Errorf("release: %w", state.ErrLeaseLost)
	busyErr := fmt.Errorf("release: %w", state.ErrBusy)
	for _, c := range []struct {
		name       string
		status     int
		lost, held bool
		released   error
		want       int
	}{
		{"held, released", 0, false, true, nil, exitOK},
		{"held, CMD failed", 3, false, true, nil, 3},
		{"held, ran out after CMD exited", 0, false, true, lostErr, exitOK},
		{"held, release busy", 0, false, true, busyErr, exitOK},
		{"a renewal found it lost", 0, true, false, nil, exitLost},
		{"a renewal found it lost, CMD failed", 9, true, false, nil, exitLost},
		{"outlived, release found it lost", 0, false, false, lostErr, exitLost},
		{"outlived, release busy", 0, false, false, busyErr, exitLost},
		{"outlived, release found it still held", 0, false, false, nil, exitOK},
		{"outlived, still held, CMD failed", 4, false, false, nil, 4},
	} {
		err := runEnd(`app.state: lease "job"`, "sh", c.status, c.lost, c.held, c.released)
		code, msg := exitOK, ""
		if err != nil {
			code, msg = describe(err)
		}
		assert.Equal(t, c.want, code, "%s: %s", c.name, msg)
		if c.want == exitLost {
			assert.Regexp(t, `^app.state: lease "job" (was|may have been) lost while sh ran.*\(it exited with status \d+\)$`, msg, c.name)
		}
	}
}
