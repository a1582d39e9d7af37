package redisstate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// pollCap bounds every wait for a short real TTL to pass, or a restarted
// server or a replica to answer: a cap for a loaded machine, not a speed
// target (half of ctxT's minute).
const pollCap = 30 * time.Second

// openDB starts a server (with opts) and opens it through state.Open under
// the prefix "t:".
func openDB(t *testing.T, opts ...redistest.Option) (*state.DB, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, opts...)
	return openURL(t, srv.URL("t:")), srv
}

// openURL opens url and closes it when the test ends.
func openURL(t *testing.T, url string) *state.DB {
	t.Helper()
	db, err := state.Open(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// redisCmd runs a command on srv and returns its first reply line.
func redisCmd(t *testing.T, srv *redistest.Server, args ...string) string {
	t.Helper()
	out, err := srv.Command(args...)
	require.NoError(t, err, "redis %s", strings.Join(args, " "))
	return out
}

// eventually polls cond every 5 ms until it holds or pollCap passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pollCap)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, pollCap)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
