package redisstate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenRefusesBadURLs(t *testing.T) {
	srv := redistest.Start(t, redistest.WithoutPersistence())
	base := "redis://:hunter2@" + srv.Addr()
	for _, c := range []struct{ url, says string }{
		{base + "/0?bogus=1", "bogus"},
		{base + "/abc", "database number"},
		{base + "/-1", "database number"},
		{base + "/0?prefix=a&prefix=b", "prefix"},
		{base + "/0?pool_size=3&pool_size=4", "pool_size is given 2 times"},
		{base + "/0?allow_unsafe_leases=maybe", "allow_unsafe_leases"},
		{base + "/0?wait_replicas=-1", "wait_replicas"},
		{base + "/0?wait_replicas=two", "wait_replicas"},
		{base + "/0?max_retries=3", "max_retries"},
		{base + "/0?dial_timeout=soon", "dial_timeout"},
		{"redis://:hunter2@h1:1,h2:2/0", "redis+cluster"},
		{"redis+cluster://:hunter2@" + srv.Addr() + "/3", "database 0"},
	} {
		db, err := state.Open(c.url)
		if db != nil {
			_ = db.Close()
		}
		require.Error(t, err, c.url)
		assert.ErrorIs(t, err, state.ErrInvalidArgument, c.url)
		assert.Contains(t, err.Error(), c.says, c.url)
		assert.NotContains(t, err.Error(), "hunter2", "the password stays out of errors")
	}
	// A database the server does not have.
	_, err := state.Open(srv.URL("t:") + "&dial_timeout=2s")
	require.NoError(t, err)
	_, err = state.Open(strings.Replace(srv.URL("t:"), "/0?", "/99?", 1))
	require.ErrorIs(t, err, state.ErrInvalidArgument)
}

func TestOpenWrongPassword(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("right-one"), redistest.WithoutPersistence())
	ok := openURL(t, srv.URL("t:"))
	require.NoError(t, ok.Set(ctxT(t), "k", 1))
	for _, url := range []string{
		"redis://:wrong-one@" + srv.Addr() + "/0",
		"redis://wrong-one@" + srv.Addr() + "/0",
		"redis://" + srv.Addr() + "/0",
	} {
		_, err := state.Open(url)
		require.ErrorIs(t, err, state.ErrUnavailable, url)
		assert.Contains(t, err.Error(), srv.Addr())
		// What redisstate says, after state.Open's "open <url>: ".
		_, own, _ := strings.Cut(err.Error(), "/0: ")
		assert.NotContains(t, own, "wrong-one")
	}
	// redis-cli's form without a colon is the password alone.
	db := openURL(t, "redis://right-one@"+srv.Addr()+"/0?prefix=t:")
	v, err := db.Get(ctxT(t), "k")
	require.NoError(t, err)
	assert.Equal(t, "1", v.String())
}

func TestOpenUnreachable(t *testing.T) {
	port, err := redistest.FreePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	start := time.Now()
	_, err = state.Open("redis://" + addr + "/0?dial_timeout=2s")
	require.ErrorIs(t, err, state.ErrUnavailable)
	assert.Contains(t, err.Error(), addr)
	assert.Less(t, time.Since(start), 30*time.Second)
}

func TestDatabasesAndPrefixesAreApart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxT(t)
	u1 := strings.Replace(srv.URL("p:"), "/0?", "/1?", 1)
	u2 := strings.Replace(srv.URL("p:"), "/0?", "/2?", 1)
	db1, db2 := openURL(t, u1), openURL(t, u2)
	other := openURL(t, strings.Replace(u1, "prefix=p%3A", "prefix=q%3A", 1))
	require.NoError(t, db1.Set(ctx, "k", "one"))
	_, err := db2.Get(ctx, "k")
	assert.ErrorIs(t, err, state.ErrNotFound, "database 2 is not database 1")
	_, err = other.Get(ctx, "k")
	assert.ErrorIs(t, err, state.ErrNotFound, "prefix q: is not prefix p:")
	assert.Equal(t, ":0", redisCmd(t, srv, "DBSIZE"), "database 0 untouched")
}

func TestServerGoneIsUnavailable(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "k", 1))
	l, err := db.Lease(ctx, "job", "me", time.Minute)
	require.NoError(t, err)
	srv.Kill()
	for _, verb := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := db.Get(ctx, "k"); return err },
		func(ctx context.Context) error { return db.Set(ctx, "k", 2) },
		func(ctx context.Context) error { _, err := db.Incr(ctx, "k"); return err },
		func(ctx context.Context) error {
			return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("k", 3) })
		},
		func(ctx context.Context) error { _, err := db.Del(ctx, "k", "j"); return err },
		func(ctx context.Context) error { _, err := db.CAS(ctx, "k", 1, 2); return err },
		func(ctx context.Context) error { _, err := db.Expire(ctx, "k", time.Hour); return err },
		func(ctx context.Context) error { _, err := db.TTL(ctx, "k"); return err },
		func(ctx context.Context) error { _, err := db.Lease(ctx, "other", "me", time.Minute); return err },
		func(ctx context.Context) error { return db.Renew(ctx, l, time.Minute) },
		func(ctx context.Context) error { return db.Release(ctx, l) },
		func(ctx context.Context) error {
			return db.Update(ctx, func(tx *state.Tx) error { _, err := tx.Now(); return err })
		},
		func(ctx context.Context) error { require.NoError(t, db.IncrBuffered("b", 1)); return db.Flush(ctx) },
		func(ctx context.Context) error {
			return db.Scan(ctx, "", false, func(state.KeyInfo) error { return nil })
		},
		func(ctx context.Context) error {
			return db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
		},
		func(ctx context.Context) error { _, err := db.Stats(ctx); return err },
		func(ctx context.Context) error { _, err := db.Check(ctx); return err },
	} {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := verb(vctx)
		cancel()
		require.Error(t, err)
		assert.ErrorIs(t, err, state.ErrUnavailable, "a server dead before the call: nothing was sent, so no outcome is unknown")
		assert.Contains(t, err.Error(), srv.Addr())
	}
	srv.Restart()
	eventually(t, "the store answers again", func() bool {
		v, err := db.Get(ctx, "k")
		return err == nil && v.String() == "1"
	})
}

// TestContextDeadlineOnHungServer: every verb, against a server paused
// (SIGSTOP) before it is called, returns its context's deadline; a write
// sent and not answered says its outcome is unknown. The URL's timeouts
// are a minute: a verb that waits for them and not for its context's
// 200 ms takes that minute, so the bound is a third of it, a cap for a
// loaded machine, not a speed target. (With the default timeouts such a
// verb took 5 s, and the bound, 2 s, left a loaded machine under 2 s.)
func TestContextDeadlineOnHungServer(t *testing.T) {
	srv := redistest.Start(t)
	db := openURL(t, srv.URL("t:")+"&dial_timeout=1m&read_timeout=1m&write_timeout=1m")
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "k", 1))
	held, err := db.Lease(ctx, "job", "me", time.Minute)
	require.NoError(t, err)
	srv.Pause()
	defer srv.Resume()
	writes := map[string]bool{"incr": true, "set": true, "del": true, "cas": true, "expire": true,
		"renew": true, "release": true, "flush": true}
	for name, verb := range map[string]func(context.Context) error{
		"get":   func(ctx context.Context) error { _, err := db.Get(ctx, "k"); return err },
		"incr":  func(ctx context.Context) error { _, err := db.Incr(ctx, "k"); return err },
		"lease": func(ctx context.Context) error { _, err := db.Lease(ctx, "l", "a", time.Second); return err },
		"update": func(ctx context.Context) error {
			return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("k", 3) })
		},
		"scan": func(ctx context.Context) error {
			return db.Scan(ctx, "", false, func(state.KeyInfo) error { return nil })
		},
		"set":     func(ctx context.Context) error { return db.Set(ctx, "k", 2) },
		"del":     func(ctx context.Context) error { _, err := db.Del(ctx, "k", "j"); return err },
		"cas":     func(ctx context.Context) error { _, err := db.CAS(ctx, "k", 1, 2); return err },
		"expire":  func(ctx context.Context) error { _, err := db.Expire(ctx, "k", time.Hour); return err },
		"ttl":     func(ctx context.Context) error { _, err := db.TTL(ctx, "k"); return err },
		"renew":   func(ctx context.Context) error { return db.Renew(ctx, held, time.Minute) },
		"release": func(ctx context.Context) error { return db.Release(ctx, held) },
		"flush": func(ctx context.Context) error {
			require.NoError(t, db.IncrBuffered("b", 1))
			return db.Flush(ctx)
		},
		"update read": func(ctx context.Context) error {
			return db.Update(ctx, func(tx *state.Tx) error { _, err := tx.Get("k"); return err })
		},
		"update now": func(ctx context.Context) error {
			return db.Update(ctx, func(tx *state.Tx) error { _, err := tx.Now(); return err })
		},
		"leases": func(ctx context.Context) error {
			return db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
		},
		"stats": func(ctx context.Context) error { _, err := db.Stats(ctx); return err },
		"check": func(ctx context.Context) error { _, err := db.Check(ctx); return err },
	} {
		vctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := verb(vctx)
		took := time.Since(start)
		cancel()
		require.Error(t, err, name)
		assert.ErrorIs(t, err, context.DeadlineExceeded, name)
		require.Less(t, took, 20*time.Second, "%s returns by its deadline (+ scheduling)", name)
		if name == "incr" {
			assert.ErrorIs(t, err, state.ErrOutcomeUnknown, "an increment sent and not answered may have counted")
		}
		if writes[name] {
			assert.ErrorIs(t, err, state.ErrOutcomeUnknown, "%s: a write sent and not answered may have been applied", name)
		}
	}
}

// TestOpenRefusesFileOptionsWithAURL: WithFS, WithReadOnly and WithClock
// mean something only for a file (a remote store's deadlines follow its
// server's clock), so Open of a URL refuses each with ErrInvalidArgument
// naming it, before it dials; the options that do nothing there
// (WithBusyTimeout, WithSweepInterval) are taken.
func TestOpenRefusesFileOptionsWithAURL(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		name string
		opt  state.Option
	}{
		{"WithFS", state.WithFS(vfs.OS())},
		{"WithReadOnly", state.WithReadOnly()},
		{"WithClock", state.WithClock(faults.NewClock(time.Now()))},
	} {
		db, err := state.Open(srv.URL("t:"), c.opt)
		require.ErrorIs(t, err, state.ErrInvalidArgument, c.name)
		assert.Contains(t, err.Error(), c.name)
		assert.Nil(t, db)
	}
	db, err := state.Open(srv.URL("t:"), state.WithBusyTimeout(time.Second), state.WithSweepInterval(time.Second))
	require.NoError(t, err)
	require.NoError(t, db.Close())
}
