package state

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNowDoesNotWaitForTheLock: Now reads the engine's time while another
// goroutine holds the handle's lock, as a running commit does, and is never
// behind a time a verb used, even on a monotonic clock that went back.
func TestNowDoesNotWaitForTheLock(t *testing.T) {
	clock := faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	db, err := Open(filepath.Join(t.TempDir(), "n.state"), WithClock(clock), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	clock.Advance(time.Second)
	require.NoError(t, db.Set(ctx, "k", 1))
	used := db.time.usedMillis()

	db.mu.Lock() // a commit in progress; Now would deadlock here if it waited
	now := db.Now()
	db.mu.Unlock()
	assert.Equal(t, used, now.UnixMilli())

	// A monotonic clock that goes back (an injected one may) moves Now no
	// further back than the latest time a verb used.
	db.time.monoAtOpen += time.Hour
	assert.Equal(t, used, db.Now().UnixMilli())
}

// TestNowBesideVerbs runs Now beside verbs (for -race): each goroutine's
// times never go back, a verb that returned ran at a time no later than a
// Now read after it, and a verb called after a Now returned runs at a time
// no earlier than it.
func TestNowBesideVerbs(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "n.state"), WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := int64(0)
			for range 200 {
				var ran int64
				ctx := hooks.WithNow(context.Background(), func(ms int64) { ran = ms })
				_, err := db.Incr(ctx, "k"+string(rune('a'+g)))
				if !assert.NoError(t, err) {
					return
				}
				assert.GreaterOrEqual(t, ran, prev, "a verb called after Now returned ran before it")
				now := db.Now().UnixMilli()
				assert.GreaterOrEqual(t, now, ran, "Now behind the time a verb that returned ran at")
				assert.GreaterOrEqual(t, now, prev, "Now went back")
				prev = now
			}
		}()
	}
	wg.Wait()
}
