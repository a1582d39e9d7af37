package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate" // redis:// URLs
	"github.com/statekit/statekit/state"
)

// runRedis measures the verbs over Redis (package redisstate) beside the
// go-redis calls a developer would write for the same job, on one
// loopback redis-server (appendonly yes, appendfsync always: the settings
// statekit's leases require), interleaved. The hand-written calls lack
// what the verbs keep: typed values, a TTL only on create, tokens.
func runRedis(e *env) ([]Result, error) {
	if redistest.Binary() == "" {
		e.logf("redis: redis-server is not installed; skipping the Redis scenarios")
		return nil, nil
	}
	dir := filepath.Join(e.dir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	srv, err := redistest.Launch(dir)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	db, err := state.Open(srv.URL("bench:"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rc.Close()
	ctx := e.ctx
	var i int64
	next := func() string { i++; return "raw:key:" + strconv.FormatInt(i%keySpace, 10) }
	cases := []struct {
		name, subject, baseline string
		sk, raw                 func() error
	}{
		{"redis-incr-ttl", "Incr with TTL (one script)", "INCR + EXPIRE pipelined",
			func() error { _, err := db.Incr(ctx, "hits", state.TTL(time.Minute)); return err },
			func() error {
				p := rc.Pipeline()
				p.Incr(ctx, "raw:hits")
				p.Expire(ctx, "raw:hits", time.Minute)
				_, err := p.Exec(ctx)
				return err
			}},
		{"redis-set-ttl", "Set with TTL", "SET PX",
			func() error { return db.Set(ctx, keyName(i), "value", state.TTL(time.Minute)) },
			func() error { return rc.Set(ctx, next(), "value", time.Minute).Err() }},
		{"redis-get", "Get", "GET",
			func() error { i++; _, err := db.Get(ctx, keyName(i)); return err },
			func() error { return rc.Get(ctx, next()).Err() }},
		{"redis-lease", "Lease + Release (token)", "SET NX PX + DEL (no token)",
			func() error {
				l, err := db.Lease(ctx, "job", "bench", time.Minute)
				if err != nil {
					return err
				}
				return db.Release(ctx, l)
			},
			func() error {
				ok, err := rc.SetNX(ctx, "raw:lock", "bench", time.Minute).Result()
				if err != nil || !ok {
					return fmt.Errorf("SET NX: %v %v", ok, err)
				}
				return rc.Del(ctx, "raw:lock").Err()
			}},
	}
	for k := range keySpace { // Get finds every key on both sides
		if err := db.Set(ctx, keyName(int64(k)), "value"); err != nil {
			return nil, err
		}
		if err := rc.Set(context.Background(), "raw:key:"+strconv.Itoa(k), "value", 0).Err(); err != nil {
			return nil, err
		}
	}
	var out []Result
	for _, c := range cases {
		sk, raw, err := interleave(e,
			func(b budget) (sample, error) { return loop(b, c.sk) },
			func(b budget) (sample, error) { return loop(b, c.raw) })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		r := ratioResult(c.name, sk.measure(c.subject), raw.measure(c.baseline), 0.8)
		out = append(out, r)
	}
	return out, nil
}
