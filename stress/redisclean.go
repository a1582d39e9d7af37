package stress

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/redisurl"
)

// dropRunKeys deletes from a server the caller runs (Redis.URL) every key
// of the run: those under its own prefix, and no other. It runs when Run
// ends, once the check has read what it needs, pass or fail, and records
// in the report how many it deleted, or why some may be left. A server the
// run started itself is killed, and its directory goes with the run's.
func (d *driver) dropRunKeys() {
	if d.redis == nil || d.redis.server != nil {
		return
	}
	r := d.report
	r.RedisPrefix = d.redis.prefix
	n, err := dropPrefix(context.Background(), d.redis.url, d.redis.prefix)
	r.KeysRemoved = n
	if err != nil {
		r.KeysLeft = err.Error()
		fmt.Fprintf(d.cfg.Log, "stress: the run's keys under %q may be left on the server: %v\n", d.redis.prefix, err)
	}
}

// dropPrefix deletes every key that starts with prefix from the database
// the redis:// URL raw names (statekit's own parameters aside), and returns
// how many it deleted. prefix must not be empty: an empty prefix would
// name every key.
func dropPrefix(ctx context.Context, raw, prefix string) (int, error) {
	if prefix == "" {
		return 0, fmt.Errorf("stress: no prefix to delete under")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("stress: %w", err)
	}
	q := u.Query()
	redisurl.StripOwn(q)
	u.RawQuery = q.Encode()
	u.User = redisurl.PasswordAlone(u.User)
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return 0, fmt.Errorf("stress: %w", err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	deleted := 0
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, redisurl.GlobEscape(prefix)+"*", 1000).Result()
		if err != nil {
			return deleted, fmt.Errorf("stress: scan %q: %w", prefix, err)
		}
		mine := keys[:0]
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				mine = append(mine, k)
			}
		}
		if len(mine) > 0 {
			n, err := c.Del(ctx, mine...).Result()
			deleted += int(n)
			if err != nil {
				return deleted, fmt.Errorf("stress: delete under %q: %w", prefix, err)
			}
		}
		if next == 0 {
			return deleted, nil
		}
		cursor = next
	}
}
