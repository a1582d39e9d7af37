package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
)

// The app scenario's rate limit: appLimit requests a user in each window of
// appWindow, a fixed window aligned on the minute.
const (
	appLimit  = 60
	appWindow = time.Minute
)

// How an app server limits, the child's -limiter.
const (
	limitIncr       = "incr"       // db.Incr(ctx, "rl:"+user+":"+window, state.TTL(time.Minute)) on a file
	limitMiddleware = "middleware" // ratelimit.NewFixedWindow + ratelimit.NewMiddleware on a file
	limitLua        = "lua"        // a go-redis client running one Lua script (INCR, PEXPIRE on 1)
)

// appChild is how the app scenario starts a server process.
type appChild struct {
	limiter    string // limitIncr, limitMiddleware or limitLua
	path       string // the file; for limitLua, the redis-server's address
	sync       string // the file's sync mode: normal or full
	cpuProfile string // where to write the server's CPU profile; "" for none
}

// rlScript is the Redis flavour's limiter, as a developer writes it: count
// the request and give a new window's key its expiry, in one round trip.
var rlScript = redis.NewScript(`local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`)

// childApp is the app scenario's server process: an HTTP server on a free
// port of 127.0.0.1 that answers GET /?user=NAME with 200, or 429 once the
// user has made appLimit requests in the current minute. It says "ready
// ADDR" on stdout and serves until its stdin is closed.
func childApp(c appChild) error {
	h, closeStore, err := c.handler()
	if err != nil {
		return err
	}
	defer closeStore()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if c.cpuProfile != "" {
		stop, err := startCPUProfile(c.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	fmt.Println("ready", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	srv.Close()
	if err := <-served; err != http.ErrServerClosed {
		return err
	}
	return nil
}

// handler returns the app's handler and what closes its store.
func (c appChild) handler() (http.Handler, func(), error) {
	if c.limiter == limitLua {
		rc := redis.NewClient(&redis.Options{Addr: c.path})
		h := limitBy(func(r *http.Request, key string) (int64, error) {
			return rlScript.Run(r.Context(), rc, []string{key}, appWindow.Milliseconds()).Int64()
		})
		return h, func() { rc.Close() }, nil
	}
	var opts []state.Option
	switch c.sync {
	case "normal":
	case "full":
		opts = append(opts, state.WithSync(state.SyncFull))
	default:
		return nil, nil, fmt.Errorf("app: -sync %q: want normal or full", c.sync)
	}
	db, err := state.Open(c.path, opts...)
	if err != nil {
		return nil, nil, err
	}
	closeDB := func() { db.Close() }
	switch c.limiter {
	case limitIncr:
		return limitBy(func(r *http.Request, key string) (int64, error) {
			return db.Incr(r.Context(), key, state.TTL(appWindow))
		}), closeDB, nil
	case limitMiddleware:
		l, err := ratelimit.NewFixedWindow(db, appLimit, appWindow)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		h, err := ratelimit.NewMiddleware(l, func(r *http.Request) string { return r.URL.Query().Get("user") },
			http.HandlerFunc(ok))
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return h, closeDB, nil
	}
	db.Close()
	return nil, nil, fmt.Errorf("app: -limiter %q: want %s, %s or %s", c.limiter, limitIncr, limitMiddleware, limitLua)
}

// limitBy is the hand-written limiter: count the request under the user's
// key for this minute, "rl:USER:MINUTE", and answer 429 past the limit.
func limitBy(count func(r *http.Request, key string) (int64, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		if user == "" {
			http.Error(w, "no user", http.StatusBadRequest)
			return
		}
		window := time.Now().UnixNano() / int64(appWindow)
		n, err := count(r, "rl:"+user+":"+strconv.FormatInt(window, 10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n > appLimit {
			http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
			return
		}
		ok(w, r)
	})
}

// ok is the app's page behind the limiter.
func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }
