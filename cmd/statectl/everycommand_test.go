package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryCommandHasHelpWithAnExample: statectl COMMAND --help, for every
// command statectl has, prints the command's usage and an example of it
// run from a shell, on stdout, with exit 0. (usage prints the "example:"
// heading whatever the example holds: the line under it is what counts.)
func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	for _, c := range commands {
		var out, errOut bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
		code := a.main([]string{c.name, "--help"})
		assert.Equal(t, exitOK, code, "%s --help: %s", c.name, errOut.String())
		assert.Empty(t, errOut.String(), "%s --help", c.name)
		assert.True(t, strings.HasPrefix(out.String(), "usage: statectl "+c.name+" "), "%s --help: %s", c.name, out.String())
		assert.Contains(t, out.String(), "\nexample:\n  $ statectl "+c.name+" ", "%s --help shows it run", c.name)
	}
}

// TestJSONOnlyWhereDocumented: dump --json and leases --json print one
// JSON object per key or lease, a line each; info, check and sweep with
// --json one object; every other command refuses --json (exit 2, doing
// nothing), as README says. A command added later must be put in one of
// the two lists here, and in README.
func TestJSONOnlyWhereDocumented(t *testing.T) {
	perLine := map[string][]string{ // command: its arguments after FILE
		"dump":   nil,
		"leases": {"--all"},
	}
	oneObject := map[string][]string{"info": nil, "check": nil, "sweep": nil}
	none := map[string][]string{
		"get": {"k"}, "ttl": {"k"}, "set": {"k", "v"}, "del": {"k"}, "incr": {"n"}, "decr": {"n"},
		"expire": {"k", "--ttl", "1m"}, "cas": {"k", "hello", "v"}, "run": {"--lease", "job", "--json", "--", "true"},
	}
	path := filepath.Join(t.TempDir(), "app.state")
	ctx := context.Background()
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "k", "hello"))
	_, err = db.Incr(ctx, "n")
	require.NoError(t, err)
	_, err = db.Lease(ctx, "job", "web-1", time.Hour)
	require.NoError(t, err)
	_, err = db.Lease(ctx, "old", "web-2", time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	wantLines := map[string]int{"dump": 2, "leases": 2}

	statectl := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
		code := a.main(args)
		return out.String(), errOut.String(), code
	}
	for _, c := range commands {
		perLineArgs, isPerLine := perLine[c.name]
		oneArgs, isOne := oneObject[c.name]
		noneArgs, isNone := none[c.name]
		switch {
		case isPerLine, isOne:
			args := append(append([]string{c.name, path}, perLineArgs...), oneArgs...)
			out, errOut, code := statectl(append(args, "--json")...)
			require.Equal(t, exitOK, code, "%s: %s", args, errOut)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			want := 1
			if isPerLine {
				want = wantLines[c.name]
			}
			assert.Len(t, lines, want, "%s --json: %s", args, out)
			for _, line := range lines {
				var obj map[string]any
				assert.NoError(t, json.Unmarshal([]byte(line), &obj), "%s --json: a line that is not one JSON object: %s", args, line)
			}
		case isNone:
			args := append([]string{c.name, path}, noneArgs...)
			if c.name != "run" {
				args = append(args, "--json")
			}
			out, errOut, code := statectl(args...)
			assert.Equal(t, exitError, code, "%s", args)
			assert.Contains(t, errOut, c.name+`: unknown flag "--json"`, "%s", args)
			assert.Empty(t, out, "%s", args)
		default:
			t.Errorf("command %s: say in README whether it takes --json, and list it here", c.name)
		}
	}
	got, errOut, code := statectl("get", path, "k")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "hello\n", got, "the refused commands did nothing")
}
