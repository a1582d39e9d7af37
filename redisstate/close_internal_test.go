package redisstate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// TestStoreClosedUnderASentWriteIsUnknown: the store's own Close, under a
// write whose command the server holds (CLIENT PAUSE WRITE), cuts the
// connection; the write is ErrOutcomeUnknown as well as ErrClosed, never
// ErrClosed alone, which reads as never sent. A handle's Close waits for
// its verbs (TestCloseWaitsForWritesInFlight), so this is the store's
// last guard, met only if that wait is ever lost.
func TestStoreClosedUnderASentWriteIsUnknown(t *testing.T) {
	s, srv := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.IncrBy(ctx, "warm", 1, 0) // the script loaded, a connection pooled
	require.NoError(t, err)
	admin := func(args ...string) string {
		t.Helper()
		out, err := redistest.CommandText(srv.Addr(), srv.Password(), args...)
		require.NoError(t, err, "%v", args)
		return out
	}
	admin("CLIENT", "PAUSE", "600000", "WRITE")
	t.Cleanup(func() { _, _ = redistest.CommandText(srv.Addr(), srv.Password(), "CLIENT", "UNPAUSE") })
	done := make(chan error, 1)
	go func() { _, err := s.IncrBy(ctx, "k", 1, 0); done <- err }()
	deadline := time.Now().Add(10 * time.Second) // a cap for a loaded machine
	for !strings.Contains(admin("INFO", "clients"), "blocked_clients:1") {
		require.False(t, time.Now().After(deadline), "the write was not held by the pause within 10s")
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, s.Close())
	err = <-done
	require.ErrorIs(t, err, state.ErrOutcomeUnknown)
	require.ErrorIs(t, err, state.ErrClosed)
}
