package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/statekit/statekit/state"
)

var checkCommand = &command{
	name:    "check",
	args:    "FILE [--json]",
	summary: "run integrity_check and statekit's invariants",
	details: `
Check FILE: SQLite's integrity_check; the file's identity and schema shape
(each lease name one row, so a released token is never reused); and every
row's invariants: keys and lease names valid UTF-8 without a NUL byte,
values integers or bytes within the size limit, deadlines never negative,
lease owners set, tokens at least 1.
Beside a process that has FILE open, it also finds what another program did
to the files beside it: a FILE-wal shorter than its index (FILE-shm) says,
or not matching it. Print each finding on a line, or "ok". Exit status 1 on any finding (at most
100 are reported). --json prints one object: {"file", "ok", "findings"}.

check opens FILE read-only.`,
	example: `
$ statectl check app.state
ok
$ statectl check broken.state
kv 'session:9': deadline -5 is negative
leases 'nightly': token 0 is not an integer of at least 1
statectl: broken.state: 2 findings`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		asJSON := fs.Bool("json", false, "print one JSON object")
		return func(a *app, pos, _ []string) error { return check(a, pos[0], *asJSON) }
	},
}

func check(a *app, path string, asJSON bool) (err error) {
	var findings []string
	db, err := openRead(path)
	switch {
	case errors.Is(err, state.ErrCorrupt):
		// Damage that stops the open (a WAL another program truncated) is
		// a finding too.
		findings = []string{err.Error()}
	case err != nil:
		return err
	default:
		defer closeDB(db, path, &err)
		findings, err = db.Check(context.Background())
		switch {
		case errors.Is(err, state.ErrCorrupt):
			// Damage that stops a query is a finding too.
			findings = []string{fileMessage(path, err)}
		case err != nil:
			return fileError(path, err)
		}
	}
	if asJSON {
		if findings == nil {
			findings = []string{}
		}
		if err := newJSONLines(a.stdout).write(struct {
			File     string   `json:"file"`
			OK       bool     `json:"ok"`
			Findings []string `json:"findings"`
		}{shown(path), len(findings) == 0, findings}); err != nil {
			return err
		}
	} else {
		for _, f := range findings {
			fmt.Fprintln(a.stdout, f)
		}
		if len(findings) == 0 {
			fmt.Fprintln(a.stdout, "ok")
		}
	}
	if len(findings) > 0 {
		return exit(exitNo, "%s: %d %s", shown(path), len(findings), plural(int64(len(findings)), "finding", "findings"))
	}
	return nil
}
