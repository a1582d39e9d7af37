package redisstate

import (
	"math"
	"sync"
	"time"
)

// clock is the store's view of the server's time: the server's TIME at
// Open advanced by this process's monotonic clock, moved forward by the
// time each script reports, never back.
type clock struct {
	mu     sync.Mutex
	baseMs int64     // a server time, ms since the epoch
	at     time.Time // when baseMs was observed, with a monotonic reading
}

// nowMs returns the estimate of the server's time in ms.
func (c *clock) nowMs() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *clock) nowLocked() int64 {
	return c.baseMs + time.Since(c.at).Milliseconds()
}

// observe takes a server time a command reported.
func (c *clock) observe(ms int64) {
	if ms <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms > c.nowLocked() {
		c.baseMs, c.at = ms, time.Now()
	}
}

// msDuration converts a count of milliseconds (a deadline minus now) to a
// Duration, clamped to the Duration range: a TTL of up to
// time.Duration(math.MaxInt64) is stored in whole milliseconds, and its ms
// times a million would not fit.
func msDuration(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > most:
		return time.Duration(math.MaxInt64)
	case ms < -most:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
