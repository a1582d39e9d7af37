package main

import (
	"context"
	"flag"
	"time"

	"github.com/statekit/statekit/state"
)

var dumpCommand = &command{
	name:    "dump",
	args:    "FILE [--prefix P] [--all] [--full] [--json]",
	summary: "print keys with type, time left and value",
	details: `
Print the live keys of FILE in key order, with type (integer or bytes), time
left before the deadline ("-" for none) and value. Values are shown as they
are when printable, Go-quoted otherwise; one longer than 64 characters is cut
to its first 60 (fewer for a quoted one, which is cut between two escapes,
never inside one), then "…" and its length in bytes, unless --full. --all also shows expired keys no sweep has deleted yet, with the time
since their deadline. --json prints one object per key, values whole:
{"key", "type", "value" (a number or a string; "base64" instead for bytes
that are not UTF-8), "expires", "ttl_ms", "expired"}.

dump is not a snapshot beside a running writer: it reads 256 keys at a time,
each batch in a read transaction of its own, so a key written while dump
runs may or may not be shown, and of two keys written in one transaction one
may be shown as before it and the other as after; every key is shown once,
with a value it had. (A FILE no process has open is read from a private
copy: one snapshot.)

dump opens FILE read-only.`,
	example: `
$ statectl dump app.state --prefix rate:
KEY             TYPE     TTL    VALUE
rate:client-42  integer  41.3s  3
rate:client-7   integer  12.9s  1`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		prefix := fs.String("prefix", "", "only keys that start with `P`")
		all := fs.Bool("all", false, "also show expired keys not swept yet")
		full := fs.Bool("full", false, "show long values whole")
		asJSON := fs.Bool("json", false, "print one JSON object per key")
		return func(a *app, pos, _ []string) error {
			return dump(a, pos[0], *prefix, *all, *full, *asJSON)
		}
	},
}

// keyJSON is a key as dump --json prints it.
type keyJSON struct {
	Key     string     `json:"key"`
	Type    string     `json:"type"`
	Value   any        `json:"value"`
	Base64  []byte     `json:"base64,omitempty"`
	Expires *time.Time `json:"expires,omitempty"`
	TTLMs   *int64     `json:"ttl_ms,omitempty"`
	Expired bool       `json:"expired,omitempty"`
}

func dump(a *app, path, prefix string, all, full, asJSON bool) (err error) {
	db, err := openRead(path)
	if err != nil {
		return err
	}
	defer closeDB(db, path, &err)
	t := newTable(a.stdout, a.tty, "KEY", "TYPE", "TTL", "VALUE")
	j := newJSONLines(a.stdout)
	err = db.Scan(context.Background(), prefix, all, func(k state.KeyInfo) error {
		if asJSON {
			return j.write(keyAsJSON(k))
		}
		// A row that cannot be written ends the scan.
		return t.row(text(k.Key), typeName(k.Value), keyTTL(k), cell(k.Value, full))
	})
	if err != nil {
		return fileError(path, err)
	}
	return t.flush()
}

func keyAsJSON(k state.KeyInfo) keyJSON {
	out := keyJSON{Key: k.Key, Type: typeName(k.Value), Expires: timeJSON(k.Expires), Expired: k.Expired}
	out.Value, out.Base64 = jsonValue(k.Value)
	if k.Left != state.NoExpiry {
		ms := millis(k.Left)
		out.TTLMs = &ms
	}
	return out
}

// keyTTL is the TTL column: the time left, "-" for no deadline, or how long
// ago an expired key's deadline passed.
func keyTTL(k state.KeyInfo) string {
	switch {
	case k.Left == state.NoExpiry:
		return "-"
	case k.Expired:
		return "expired " + dur(-k.Left) + " ago"
	}
	return dur(k.Left)
}
