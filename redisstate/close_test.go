package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseWaitsForWritesInFlight closes the store while a write it sent
// waits on the server for its answer (held there by CLIENT PAUSE WRITE,
// seen postponed in CLIENT LIST), as a file's Close waits for the verb
// that holds the handle: once Close has begun (a new call is refused with
// ErrClosed) the server is let go, and the write gets its answer, applied,
// before Close closes the client. Close used to cut the connection under
// it, and the verb said ErrClosed, which a caller reads as never sent,
// though the server could have run it. The client's read timeout is
// raised to a minute so that nothing here races it.
func TestCloseWaitsForWritesInFlight(t *testing.T) {
	srv := redistest.Start(t)
	admin := rawClient(t, srv)
	ctx := ctxT(t)
	for _, c := range []struct {
		name string
		call func(db *state.DB) error
	}{
		{"incr", func(db *state.DB) error {
			n, err := db.Incr(ctx, "n")
			if err == nil && n != 1 {
				return fmt.Errorf("incr answered %d, not 1", n)
			}
			return err
		}},
		{"update", func(db *state.DB) error {
			return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("n", 1) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := srv.URL("t:"+c.name+":") + "&read_timeout=60s"
			db := openURL(t, url)
			// Every script loaded and a connection in the pool: the call
			// below sends its command at once.
			_, err := db.Incr(ctx, "warm")
			require.NoError(t, err)
			require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err())
			paused := true
			unpause := func() {
				if paused {
					paused = false
					require.NoError(t, admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err())
				}
			}
			t.Cleanup(unpause)
			done := make(chan error, 1)
			go func() { done <- c.call(db) }()
			eventually(t, c.name+" held by the pause", func() bool {
				list, err := admin.ClientList(ctx).Result()
				require.NoError(t, err)
				return postponed(list)
			})
			closed := make(chan error, 1)
			go func() { closed <- db.Close() }()
			eventually(t, "Close begun", func() bool {
				_, err := db.Get(ctx, "other") // a read: the pause lets it through
				return errors.Is(err, state.ErrClosed)
			})
			select {
			case err := <-closed:
				t.Fatalf("Close returned (%v) while a write it had sent was held on the server", err)
			default:
			}
			unpause()
			require.NoError(t, <-done, "a write sent before Close gets its answer")
			require.NoError(t, <-closed)
			again := openURL(t, url)
			v, err := again.Get(ctx, "n")
			require.NoError(t, err)
			n, _ := v.Int()
			assert.Equal(t, int64(1), n, "the write is applied")
		})
	}
}

// postponed reports whether CLIENT LIST's reply shows a client whose
// command the server holds (flag b: blocked, as CLIENT PAUSE holds one).
func postponed(list string) bool {
	for _, line := range strings.Split(list, "\n") {
		for _, field := range strings.Fields(line) {
			if flags, ok := strings.CutPrefix(field, "flags="); ok && strings.Contains(flags, "b") {
				return true
			}
		}
	}
	return false
}
