package stress

import (
	"context"
	"slices"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDropPrefixDeletesOnlyUnderIt: SCAN's MATCH pattern gives meaning to
// *, ?, [ and \, which a URL's prefix may hold; each is matched as itself,
// so a key a glob would also match stays, and an empty prefix, which
// names every key, is refused.
func TestDropPrefixDeletesOnlyUnderIt(t *testing.T) {
	s := redistest.Start(t)
	const prefix = `a*[b]?\:stress:1:2:`
	mine := []string{prefix + "k:x", prefix + "lease:L"}
	others := []string{`aX[b]?\:stress:1:2:k:x`, `a*b?\:stress:1:2:k:x`, `a*[b]Z\:stress:1:2:k:x`, "a*[b]?\\:stress:1:3:k:x", "k:x"}
	for _, k := range append(slices.Clone(mine), others...) {
		_, err := s.Command("SET", k, "i:1")
		require.NoError(t, err)
	}
	_, err := dropPrefix(context.Background(), s.URL(""), "")
	require.Error(t, err, "an empty prefix is every key")
	n, err := dropPrefix(context.Background(), s.URL("ignored:"), prefix)
	require.NoError(t, err)
	assert.Equal(t, len(mine), n)
	for _, k := range others {
		got, err := s.Command("EXISTS", k)
		require.NoError(t, err)
		assert.Equal(t, ":1", got, "%s stays", k)
	}
	got, err := s.Command("DBSIZE")
	require.NoError(t, err)
	assert.Equal(t, ":5", got)
}
