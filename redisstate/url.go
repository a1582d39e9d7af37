package redisstate

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/backend"
	"github.com/statekit/statekit/internal/redisurl"
	"github.com/statekit/statekit/state"
)

// defaultDialTimeout bounds Open's first contact with the server unless the
// URL's dial_timeout says otherwise.
const defaultDialTimeout = 5 * time.Second

// config is what a URL says.
type config struct {
	scheme       string
	prefix       string // namespaces every Redis key of the store
	allowUnsafe  bool   // allow_unsafe_leases=true
	waitReplicas int    // wait_replicas=N: a grant waits for N replicas (WAIT)
	addr         string // host:port, or the cluster's seeds joined by commas, for errors
	dialTimeout  time.Duration
	single       *redis.Options
	cluster      *redis.ClusterOptions
}

// refusedParams are go-redis parameters a statekit store refuses: a
// command go-redis resent after a lost reply could be applied twice.
var refusedParams = map[string]string{
	"max_retries":       "statekit never resends a command whose outcome is unknown (a resent increment could count twice)",
	"min_retry_backoff": "statekit never resends commands",
	"max_retry_backoff": "statekit never resends commands",
}

// maxConns bounds the parameters that count connections: one client
// cannot open more to one server (a source address has 65535 ports).
const maxConns = 65535

// intParams are go-redis's integer parameters and the range a statekit
// store accepts for each: go-redis panics on some values out of range (a
// negative pool_size) and silently reads others as something else.
var intParams = map[string][2]int{
	"db":                         {0, math.MaxInt32},
	"protocol":                   {2, 3},
	"pool_size":                  {1, maxConns},
	"min_idle_conns":             {0, maxConns},
	"max_idle_conns":             {0, maxConns},
	"max_active_conns":           {0, maxConns},
	"max_concurrent_dials":       {0, maxConns},
	"pipeline_pool_size":         {-1, maxConns}, // -1 turns go-redis's pipeline pool off
	"pipeline_read_buffer_size":  {0, 1 << 30},
	"pipeline_write_buffer_size": {0, 1 << 30},
	"dialer_retries":             {0, 100},
	"max_redirects":              {-1, 100}, // a cluster's; -1: none
	"failing_timeout_seconds":    {0, 1 << 30},
}

// durationParams are go-redis's duration parameters. Each must be a
// positive duration ("2s", "500ms", or whole seconds as "2"): go-redis
// reads 0 or less as "no timeout" (a read on a paused server would wait
// forever), or as its default.
var durationParams = []string{
	"dial_timeout", "read_timeout", "write_timeout", "pool_timeout",
	"conn_max_idle_time", "idle_timeout", "conn_max_lifetime", "max_conn_age",
	"conn_max_lifetime_jitter", "route_by_latency_tolerance", "dialer_retry_timeout",
}

// checkRanges refuses a numeric parameter out of its range, or that does
// not parse, naming it. Every value of a repeated parameter is checked.
func checkRanges(q url.Values) error {
	for name, r := range intParams {
		for _, s := range q[name] {
			n, err := strconv.Atoi(s)
			if err != nil || n < r[0] || n > r[1] {
				return invalid("%s=%q: want a whole number from %d to %d", name, s, r[0], r[1])
			}
		}
	}
	for _, name := range durationParams {
		for _, s := range q[name] {
			d, err := time.ParseDuration(s)
			if n, aerr := strconv.ParseInt(s, 10, 64); aerr == nil {
				d, err = time.Duration(n)*time.Second, nil
				if n > math.MaxInt64/int64(time.Second) {
					d = -1
				}
			}
			if err != nil || d <= 0 {
				return invalid("%s=%q: want a positive duration, as 2s or 500ms", name, s)
			}
		}
	}
	return nil
}

// checkHosts refuses a host without a name or with a port out of 1-65535
// (which would otherwise cost Open its dial retries before it says
// ErrUnavailable).
func checkHosts(hosts []string) error {
	for _, h := range hosts {
		name, port, err := net.SplitHostPort(h)
		if err != nil {
			if !strings.Contains(err.Error(), "missing port") {
				return invalid("bad address %q: %v", h, err)
			}
			name, port = h, ""
		}
		if name == "" {
			return invalid("address %q has no host name", h)
		}
		if port == "" {
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return invalid("bad port %q in %q: want 1 to 65535", port, h)
		}
	}
	return nil
}

// invalid builds an ErrInvalidArgument error.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", state.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// parseURL reads a redis://, rediss:// or redis+cluster:// URL. Its errors
// never hold the password.
func parseURL(raw string) (*config, error) {
	if backend.UnescapedUserInfo(raw) {
		return nil, invalid("malformed URL: the user name or password holds a character a URL must percent-encode ('/' as %%2F, '?' as %%3F, '#' as %%23)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password and all
		}
		return nil, invalid("malformed URL: %v", err)
	}
	c := &config{scheme: strings.ToLower(u.Scheme), dialTimeout: defaultDialTimeout}
	switch c.scheme {
	case "redis", "rediss", "redis+cluster":
	default:
		return nil, invalid("scheme %q is not redis, rediss or redis+cluster", u.Scheme)
	}
	if u.Opaque != "" {
		return nil, invalid("malformed URL: want %s://host:port/...", c.scheme)
	}
	if u.Fragment != "" {
		return nil, invalid("malformed URL: a fragment (#...) means nothing here")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalid("malformed query: %v", err)
	}
	for name, why := range refusedParams {
		if q.Has(name) {
			return nil, invalid("parameter %s is not accepted: %s", name, why)
		}
	}
	if err := checkRanges(q); err != nil {
		return nil, err
	}
	for name, vs := range q {
		// go-redis would take one of them silently.
		if len(vs) > 1 {
			return nil, invalid("parameter %s is given %d times", name, len(vs))
		}
	}
	c.prefix = q.Get("prefix")
	if s := q.Get("allow_unsafe_leases"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, invalid("allow_unsafe_leases=%q: want true or false", s)
		}
		c.allowUnsafe = b
	}
	if s := q.Get("wait_replicas"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, invalid("wait_replicas=%q: want a number of replicas, 0 or more", s)
		}
		c.waitReplicas = n
	}
	redisurl.StripOwn(q)
	user := redisurl.PasswordAlone(u.User)
	if c.scheme == "redis+cluster" {
		return c, c.clusterOptions(u, user, q)
	}
	return c, c.singleOptions(u, user, q)
}

// singleOptions fills c.single from the URL: /N selects the database.
func (c *config) singleOptions(u *url.URL, user *url.Userinfo, q url.Values) error {
	if strings.Contains(u.Host, ",") {
		return invalid("%s:// names one server; for several, use redis+cluster://", c.scheme)
	}
	if err := checkHosts([]string{u.Host}); err != nil {
		return err
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || strings.Contains(db, "/") {
			return invalid("bad database number %q in the path (want /0, /1, ...)", db)
		}
		for _, s := range q["db"] {
			if m, _ := strconv.Atoi(s); m != n {
				return invalid("the path selects database %d and the parameter db=%s another: give one", n, s)
			}
		}
	}
	r := url.URL{Scheme: c.scheme, User: user, Host: u.Host, Path: u.Path, RawQuery: q.Encode()}
	o, err := redis.ParseURL(r.String())
	if err != nil {
		return invalid("%v", err)
	}
	if o.DB < 0 {
		return invalid("bad database number %d", o.DB)
	}
	c.addr = o.Addr
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	if o.DialTimeout <= 0 {
		o.DialTimeout = c.dialTimeout
	}
	c.dialTimeout = o.DialTimeout
	c.single = o
	return nil
}

// clusterOptions fills c.cluster from redis+cluster://host1:port1,host2:port2/
// (more seeds may come as addr= parameters). A cluster has database 0 only.
func (c *config) clusterOptions(u *url.URL, user *url.Userinfo, q url.Values) error {
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return invalid("a cluster has database 0 only, not %q", p)
	}
	hosts := strings.Split(u.Host, ",")
	for _, h := range hosts {
		if h == "" {
			return invalid("empty address in the host list %q", u.Host)
		}
	}
	if err := checkHosts(append(hosts, q["addr"]...)); err != nil {
		return err
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	r := url.URL{Scheme: "redis", User: user, Host: hosts[0], RawQuery: q.Encode()}
	o, err := redis.ParseClusterURL(r.String())
	if err != nil {
		return invalid("%v", err)
	}
	c.addr = strings.Join(o.Addrs, ",")
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	if o.DialTimeout <= 0 {
		o.DialTimeout = c.dialTimeout
	}
	c.dialTimeout = o.DialTimeout
	c.cluster = o
	return nil
}
