package state_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenURLWithoutBackend: a redis:// URL in a program that does not
// import redisstate fails at Open, naming the package to import, and
// creates no file; an unknown scheme names the ones Open knows; a password
// in the URL never reaches the error.
func TestOpenURLWithoutBackend(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, u := range []string{"redis://127.0.0.1:1/0?prefix=app:", "rediss://u:secret@127.0.0.1:1", "redis+cluster://127.0.0.1:1"} {
		db, err := state.Open(u)
		require.Error(t, err, u)
		assert.Nil(t, db)
		assert.ErrorIs(t, err, state.ErrInvalidArgument)
		assert.Contains(t, err.Error(), `import "github.com/statekit/statekit/redisstate"`)
		assert.NotContains(t, err.Error(), "secret")
	}
	_, err := state.Open("memcached://127.0.0.1:11211")
	require.ErrorIs(t, err, state.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `unknown scheme "memcached"`)
	assert.Contains(t, err.Error(), "redis://")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "Open of a URL creates no file")
}

// TestQuickstartLinksNoRedisClient: a program that never imports
// redisstate links no Redis client.
func TestQuickstartLinksNoRedisClient(t *testing.T) {
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "list", "-deps", "./examples/quickstart")
	cmd.Dir = filepath.Dir(packageDir(t))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	deps := string(out)
	require.Contains(t, deps, "github.com/statekit/statekit/state", "the listing is of the quickstart")
	for _, pkg := range []string{"github.com/redis/go-redis", "github.com/statekit/statekit/redisstate"} {
		assert.False(t, strings.Contains(deps, pkg), "the quickstart links %s", pkg)
	}
}

// TestOpenNamesURLWithoutPassword: no form of a URL's password reaches
// Open's error, a URL that does not parse included.
func TestOpenNamesURLWithoutPassword(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://:pw@h:6379/0":         "redis://:xxxxx@h:6379/0",
		"redis://user:pw@h:6379/0?a=b": "redis://user:xxxxx@h:6379/0?a=b",
		"redis://pw@h:6379":            "redis://xxxxx@h:6379",
		"redis://u:p@ss@h:1":           "redis://u:xxxxx@h:1",
		"redis://u:pw@h:badport/0":     "redis://u:xxxxx@h:badport/0",
		"redis://h:6379/0?prefix=a@b":  "redis://h:6379/0?prefix=a@b",
	} {
		_, err := state.Open(raw)
		require.Error(t, err, raw)
		assert.True(t, strings.HasPrefix(err.Error(), "open "+want+": "), "%s: %v", raw, err)
		assert.NotContains(t, err.Error(), "pw", raw)
	}
}

// packageDir returns this package's source directory, found from this
// file's path, not from the working directory, which a test may change.
func packageDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok, "runtime.Caller")
	return filepath.Dir(file)
}
