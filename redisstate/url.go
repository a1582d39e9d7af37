package redisstate

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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

// ownParams are the query parameters this package reads itself and strips
// before go-redis parses the rest.
var ownParams = []string{"prefix", "allow_unsafe_leases", "wait_replicas"}

// refusedParams are go-redis parameters a statekit store refuses: a
// command go-redis resent after a lost reply could be applied twice.
var refusedParams = map[string]string{
	"max_retries":       "statekit never resends a command whose outcome is unknown (a resent increment could count twice)",
	"min_retry_backoff": "statekit never resends commands",
	"max_retry_backoff": "statekit never resends commands",
}

// invalid builds an ErrInvalidArgument error.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", state.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// parseURL reads a redis://, rediss:// or redis+cluster:// URL. Its errors
// never hold the password.
func parseURL(raw string) (*config, error) {
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
	for _, name := range ownParams {
		if len(q[name]) > 1 {
			return nil, invalid("parameter %s is given %d times", name, len(q[name]))
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
	for _, name := range ownParams {
		q.Del(name)
	}
	user := u.User
	if user != nil {
		if _, has := user.Password(); !has {
			// redis-cli reads redis://secret@host as the password alone.
			user = url.UserPassword("", user.Username())
		}
	}
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
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || strings.Contains(db, "/") {
			return invalid("bad database number %q in the path (want /0, /1, ...)", db)
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
