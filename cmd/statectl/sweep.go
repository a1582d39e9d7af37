package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

var sweepCommand = &command{
	name:    "sweep",
	args:    "FILE [--json]",
	summary: "delete expired keys now",
	details: `
Delete every expired key of FILE now, in small transactions, and print how
many and how long it took. Expired keys are already absent to every verb; a
sweep reclaims their space. Leases are never swept. --json prints
{"swept", "took_ms"}.`,
	example: `
$ statectl sweep app.state
swept 1204 expired keys in 38.2ms`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		asJSON := fs.Bool("json", false, "print one JSON object")
		return func(a *app, pos, _ []string) error { return sweep(a, pos[0], *asJSON) }
	},
}

func sweep(a *app, path string, asJSON bool) (err error) {
	db, err := openWrite(path)
	if err != nil {
		return err
	}
	defer closeDB(db, path, &err)
	start := time.Now()
	n, err := db.Sweep(context.Background())
	took := time.Since(start)
	if err != nil {
		return fileError(path, err)
	}
	if asJSON {
		return newJSONLines(a.stdout).write(struct {
			Swept  int     `json:"swept"`
			TookMs float64 `json:"took_ms"`
		}{n, float64(took.Microseconds()) / 1000})
	}
	noun := "keys"
	if n == 1 {
		noun = "key"
	}
	fmt.Fprintf(a.stdout, "swept %d expired %s in %s\n", n, noun, dur(took))
	return nil
}
