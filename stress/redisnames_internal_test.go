package stress

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoRunsOnOneServerKeepTheirWorkersApart: two runs with the same seed
// against one server (-redis-url) name their workers' connections apart,
// so a run waiting for its dead worker's connections to leave the server
// is not held up by the other run's live worker of the same index.
func TestTwoRunsOnOneServerKeepTheirWorkersApart(t *testing.T) {
	s := redistest.Start(t)
	var logA bytes.Buffer
	a := &driver{cfg: Config{Seed: 7, Redis: &Redis{URL: s.URL("")}, Log: &logA}}
	b := &driver{cfg: Config{Seed: 7, Redis: &Redis{URL: s.URL("")}}}
	require.NoError(t, a.setupRedis())
	require.NoError(t, b.setupRedis())
	nameA, nameB := clientNameOf(t, a.workerURL(0)), clientNameOf(t, b.workerURL(0))
	assert.NotEqual(t, nameA, nameB, "worker 1 of two runs")
	assert.True(t, strings.HasSuffix(nameA, "0001"), "%q names the worker", nameA)
	assert.NotEqual(t, nameA, clientNameOf(t, a.workerURL(1)), "two workers of one run")

	// b's worker 1 is connected; a's worker 1 is dead and gone.
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ClientName: nameB})
	defer c.Close()
	require.NoError(t, c.Ping(context.Background()).Err())
	list, err := redistest.CommandText(s.Addr(), "", "CLIENT", "LIST")
	require.NoError(t, err)
	require.Contains(t, list, " name="+nameB+" ", "the other run's worker is connected")
	a.report = &Report{}
	a.awaitGone(&proc{index: 0})
	assert.NotContains(t, logA.String(), "still holds a connection", "the other run's worker passed for this run's")
}

// clientNameOf returns the client_name a worker URL asks for.
func clientNameOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	name := u.Query().Get("client_name")
	require.NotEmpty(t, name, raw)
	return name
}
