package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/recipehooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lateDecision is one request of TestALateVerbNeverOverAdmits: the time it
// was decided by (the last the limiter told its hook) and its answer.
type lateDecision struct {
	at      int64 // unix ns
	allowed bool
}

// TestALateVerbNeverOverAdmits decides requests of one whose verb runs late:
// the clock moves on by up to three windows between the moment a limiter
// reads the time it decides by and the rest of the decision (what a
// goroutine descheduled, or queued behind the file's lock or a paused
// process, sees). The rows a decision needs may expire meanwhile. Placed by
// the time each was decided by, no window may allow more than the limit,
// and no bucket more than its burst plus its refill.
func TestALateVerbNeverOverAdmits(t *testing.T) {
	const w = 10 * time.Millisecond
	stalls := []time.Duration{0, 0, w / 2, w, 2 * w, 0, 3 * w, w / 3, 2*w + w/2, 0, 5 * w / 2}
	for _, name := range []string{"fixed", "sliding", "bucket"} {
		t.Run(name, func(t *testing.T) {
			db, clock := openDB(t)
			l := limiters(t, db, 1, w)[name]
			var got []lateDecision
			for i := range 200 {
				stall := stalls[i%len(stalls)]
				var at int64
				calls := 0
				ctx := recipehooks.With(context.Background(), &recipehooks.Hooks{Decided: func(ns int64) {
					at = ns
					if calls++; calls == 1 {
						clock.Advance(stall)
					}
				}})
				d, err := l.Allow(ctx, "k")
				require.NoError(t, err)
				got = append(got, lateDecision{at, d.Allowed})
				clock.Advance(time.Duration(i%7) * time.Millisecond)
			}
			allowed := 0
			for _, d := range got {
				if d.allowed {
					allowed++
				}
			}
			require.Greater(t, allowed, 10, "the limiter allows some")
			assert.Empty(t, overAdmitted(name, got, int64(w)))
		})
	}
}

// overAdmitted returns what got breaks of a limit of one per window w:
// for a fixed window, two allowed in one window; for a sliding one, an
// allowed request that did not fit the weighted count of those allowed
// before it (the previous window's weighted by what the sliding window
// still covers); for a bucket of one, two allowed less than a window apart.
func overAdmitted(kind string, got []lateDecision, w int64) []string {
	var bad []string
	perWindow := map[int64]int64{}
	var lastAllowed int64 = -1
	for i, d := range got {
		if !d.allowed {
			continue
		}
		idx, into := d.at/w, d.at%w
		switch kind {
		case "fixed":
			if perWindow[idx]++; perWindow[idx] > 1 {
				bad = append(bad, fmt.Sprintf("request %d: a second allowed in window %d", i, idx))
			}
		case "sliding":
			// prev*(w-into)/w + cur + 1 <= 1, in integers.
			if perWindow[idx-1]*(w-into)+(perWindow[idx]+1)*w > w {
				bad = append(bad, fmt.Sprintf("request %d at %d ns into window %d: previous %d, current %d",
					i, into, idx, perWindow[idx-1], perWindow[idx]))
			}
			perWindow[idx]++
		case "bucket":
			if lastAllowed >= 0 && d.at-lastAllowed < w {
				bad = append(bad, fmt.Sprintf("request %d: allowed %v after the last allowed", i, time.Duration(d.at-lastAllowed)))
			}
			lastAllowed = d.at
		}
	}
	return bad
}
