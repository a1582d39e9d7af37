package state_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["walrestart"] = walRestartHelper
}

// walRestartHelper increments one key back to back until path+".stop"
// exists, or 30,000 times; then it says so (path+".capped-PID") and waits
// for the stop file before it closes the file, since a close checkpoints.
func walRestartHelper(path string) int {
	db, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer db.Close()
	stopped := func() bool {
		_, err := os.Stat(path + ".stop")
		return err == nil
	}
	for i := range 30000 {
		if i%256 == 0 && stopped() {
			return 0
		}
		if _, err := db.Incr(context.Background(), "hot"); err != nil {
			fmt.Fprintln(os.Stderr, "incr:", err)
			return 4
		}
	}
	if err := os.WriteFile(fmt.Sprintf("%s.capped-%d", path, os.Getpid()), nil, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	for !stopped() {
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

// TestWALStartsOverWithSeveralProcesses: four processes increment one key
// on one file back to back, each checkpointing in the background every 200
// of its writes. Another process's commits keep coming while one's
// checkpoint runs, yet the WAL starts over: its length (read from the WAL
// index's header) falls below 1,000 frames after having passed 4,000. With
// a last pass that did not hold the other processes off (a passive
// checkpoint) it grew by every write to the end (measured: 80,000 frames
// after 80,000 calls). Counted, not timed: at most 30,000 writes each.
func TestWALStartsOverWithSeveralProcesses(t *testing.T) {
	const children = 4
	path := filepath.Join(t.TempDir(), "shared.state")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runChildren(t, children, "walrestart", path)
	}()
	frames := func() uint32 { // mxFrame, in the machine's byte order (little-endian here)
		var hdr [20]byte
		f, err := os.Open(path + "-shm")
		if err != nil {
			return 0 // not made yet
		}
		defer f.Close()
		if _, err := f.ReadAt(hdr[:], 0); err != nil {
			return 0
		}
		return binary.LittleEndian.Uint32(hdr[16:])
	}
	capped := func() bool { // a child wrote all it may: fewer write from here
		found, err := filepath.Glob(path + ".capped-*")
		require.NoError(t, err)
		return len(found) > 0
	}
	var most uint32
	restarted := false
	for i := 0; !restarted; i++ {
		if i%1024 == 0 && capped() {
			break
		}
		select {
		case <-done: // a child failed (runChildren said why)
			return
		default:
		}
		n := frames()
		most = max(most, n)
		restarted = most > 4000 && n > 0 && n < 1000
	}
	require.NoError(t, os.WriteFile(path+".stop", nil, 0o644))
	<-done
	assert.True(t, restarted, "the WAL never started over: %d frames at most", most)
}
