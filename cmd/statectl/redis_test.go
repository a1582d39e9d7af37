package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/statekit/statekit/internal/redistest"
)

// TestScriptsRedis runs the real binary against a real redis-server the
// test starts (with a password, which no message may show):
// testdata/redis/*.txtar, with $URL the store's URL and $DOWN the URL of a
// port nothing listens on.
func TestScriptsRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("s3cret-pw"))
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/redis",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("GORACE", strings.TrimSpace(env.Getenv("GORACE")+" atexit_sleep_ms=0"))
			// Each script its own prefix: the scripts share the server.
			env.Setenv("URL", srv.URL(filepath.Base(env.WorkDir)+":"))
			env.Setenv("DOWN", "redis://127.0.0.1:"+strconv.Itoa(port)+"/0")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": cmdExitcode,
			"waitfile": cmdWaitfile,
		},
	})
}
