package redisstate_test

import (
	"fmt"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every numeric parameter is checked against its range at Open, which
// names it: go-redis panics on some values (a negative pool_size) and
// reads others as something else (a read_timeout of 0 as none). A path
// database and a db= parameter that disagree, a port out of range, and a
// password holding a character a URL must escape are refused too, and no
// message shows the password.
func TestOpenRefusesParametersOutOfRange(t *testing.T) {
	srv := redistest.Start(t, redistest.WithoutPersistence())
	base := "redis://:hunter2@" + srv.Addr()
	for _, c := range []struct{ url, says string }{
		{base + "/0?pool_size=-1", "pool_size"},
		{base + "/0?pool_size=0", "pool_size"},
		{base + "/0?pool_size=99999999999", "pool_size"},
		{base + "/0?min_idle_conns=-1", "min_idle_conns"},
		{base + "/0?max_idle_conns=-5", "max_idle_conns"},
		{base + "/0?max_active_conns=-1", "max_active_conns"},
		{base + "/0?max_concurrent_dials=-2", "max_concurrent_dials"},
		{base + "/0?pipeline_pool_size=-2", "pipeline_pool_size"},
		{base + "/0?protocol=7", "protocol"},
		{base + "/0?dial_timeout=0", "dial_timeout"},
		{base + "/0?read_timeout=0", "read_timeout"},
		{base + "/0?read_timeout=-1s", "read_timeout"},
		{base + "/0?write_timeout=-1", "write_timeout"},
		{base + "/0?pool_timeout=0s", "pool_timeout"},
		{base + "/0?conn_max_idle_time=-1", "conn_max_idle_time"},
		{base + "/0?pool_size=4&pool_size=-1", "pool_size"},
		{base + "/0?db=-1", "db"},
		{base + "/3?db=5", "db=5"},
		{"redis://:hunter2@127.0.0.1:99999/0", "port"},
		{"redis://:hunter2@127.0.0.1:0/0", "port"},
		{"redis+cluster://:hunter2@127.0.0.1:1,127.0.0.1:70000", "port"},
		{"redis://:hun/ter2@" + srv.Addr() + "/0", "percent-encode"},
		{"redis://:hun?ter2@" + srv.Addr() + "/0", "percent-encode"},
		{"redis://:hun#ter2@" + srv.Addr() + "/0", "percent-encode"},
		{"redis://hun/ter2@" + srv.Addr() + "/0", "percent-encode"},
	} {
		var db *state.DB
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("Open panicked: %v", r)
				}
			}()
			db, err = state.Open(c.url)
		}()
		if db != nil {
			_ = db.Close()
		}
		require.Error(t, err, c.url)
		assert.ErrorIs(t, err, state.ErrInvalidArgument, c.url)
		assert.Contains(t, err.Error(), c.says, c.url)
		assert.NotContains(t, err.Error(), "hunter2", "the password stays out of errors")
		assert.NotContains(t, err.Error(), "ter2", "the password stays out of errors")
	}
	for _, ok := range []string{
		"/0?pool_size=4&min_idle_conns=0&read_timeout=2s&write_timeout=2&pool_timeout=3s&protocol=2",
		"/3?db=3",
		"/0?pipeline_pool_size=-1",
	} {
		db, err := state.Open("redis://" + srv.Addr() + ok)
		require.NoError(t, err, ok)
		require.NoError(t, db.Set(ctxT(t), "k", 1), ok)
		require.NoError(t, db.Close())
	}
}
