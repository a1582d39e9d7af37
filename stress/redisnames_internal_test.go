package stress

import (
	"bytes"
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

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

	// a's own worker 1 is still connected: a waits, looking again and
	// again, until its connection leaves the server.
	own := redis.NewClient(&redis.Options{Addr: s.Addr(), ClientName: nameA})
	require.NoError(t, own.Ping(context.Background()).Err())
	looked := func() int { return clientListCalls(t, c) }
	first := looked()
	gone := make(chan struct{})
	go func() {
		a.awaitGone(&proc{index: 0})
		close(gone)
	}()
	for i := 0; looked() < first+3; i++ {
		select {
		case <-gone:
			own.Close()
			t.Fatalf("awaitGone returned while this run's worker was connected")
		default:
		}
		require.Less(t, i, 2000, "awaitGone did not look at the server's clients")
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, own.Close())
	<-gone
	assert.NotContains(t, logA.String(), "still holds a connection", "it stopped waiting once the connection left")
}

// clientListCalls returns how many CLIENT LIST commands the server of c
// has run.
func clientListCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		// Redis 7 counts CLIENT LIST alone, Redis 6 every CLIENT command.
		rest, ok := strings.CutPrefix(line, "cmdstat_client|list:calls=")
		if !ok && !strings.Contains(info, "cmdstat_client|") {
			rest, ok = strings.CutPrefix(line, "cmdstat_client:calls=")
		}
		if ok {
			n, _, _ := strings.Cut(rest, ",")
			calls, err := strconv.Atoi(n)
			require.NoError(t, err, line)
			return calls
		}
	}
	return 0
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
