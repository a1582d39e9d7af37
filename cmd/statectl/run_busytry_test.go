package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunWaitsForAFileBusySinceItsOpenNoLongerThanTheWait: the file opened
// free, and another process took its write lock before run's look at the
// lease (a read may write the handle's time mark, and wait for the lock as
// a write does) or, once the handle's mark is fresh, before the grant, so
// that try finds it busy. With --wait 300ms and a ttl of 30 s (a busy
// timeout of 5 s), the try waits for the lock no longer than the wait: run
// gives up with status 2, saying it waited 300ms, and the wait went in the
// try, so there was nothing left to say it waits for. Before, each try
// waited the handle's whole busy timeout, 5 s at least on any machine,
// which bounds it here.
func TestRunWaitsForAFileBusySinceItsOpenNoLongerThanTheWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		markRead bool // a read just before the lock is taken: the mark is fresh
	}{{"look", false}, {"grant", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.state")
			o := runOptions{lease: "job", owner: "me", ttl: 30 * time.Second, wait: 300 * time.Millisecond}
			db, err := openWrite(path, state.WithBusyTimeout(runBusyTimeout(o.ttl)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			if tc.markRead {
				_, err := heldBy(context.Background(), db, o.lease, o.owner)
				require.NoError(t, err)
			}
			release := holdWriteLock(t, path)

			var errOut bytes.Buffer
			w := newWaiter(&app{stderr: &errOut}, path, o, nil)
			began := time.Now()
			l, _, err := acquire(db, w)
			took := time.Since(began)
			release()

			assert.Nil(t, l)
			var e *exitErr
			require.True(t, errors.As(err, &e), "%v", err)
			assert.Equal(t, exitError, e.code)
			assert.Equal(t, busyMessage(path)+" (waited 300ms)", e.msg)
			assert.Empty(t, errOut.String())
			assert.GreaterOrEqual(t, took, o.wait, "run waited what it says")
			assert.Less(t, took, runBusyTimeout(o.ttl), "a try waited its busy timeout, past the wait")
		})
	}
}
