package state

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An increment of a live key with a deadline writes one page, its row's:
// not the key's entry in the expiry index too, which a statement that sets
// expires_at rewrites even when the value it sets is the one there. The
// full statement, run the same way, writes two, so the count can tell.
func TestIncrOfAKeyWithADeadlineWritesOnePage(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "c.state"), WithoutBackground())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	_, err = db.Incr(ctx, "c", TTL(time.Hour))
	require.NoError(t, err)
	require.GreaterOrEqual(t, db.pagesWritten(), 0, "the page counter is not there")

	before := db.pagesWritten()
	n, err := db.Incr(ctx, "c", TTL(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	assert.Equal(t, 1, db.pagesWritten()-before, "pages an Incr of a live key with a deadline wrote")

	db.mu.Lock()
	now := db.time.nowMillis()
	lo, hi := incrBounds(1)
	before = db.pagesWritten()
	require.NoError(t, db.st.incr.QueryRowContext(ctx, "c", int64(1), nil, now, lo, hi).Scan(&n))
	assert.Equal(t, int64(3), n)
	assert.Equal(t, 2, db.pagesWritten()-before, "the full statement, which sets expires_at, writes the index's page too")
	db.mu.Unlock()
	left, err := db.TTL(ctx, "c")
	require.NoError(t, err)
	assert.Greater(t, left, 59*time.Minute, "both kept the deadline")
}
