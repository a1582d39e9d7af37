package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/statekit/statekit/state"
)

var infoCommand = &command{
	name:    "info",
	args:    "FILE [--json]",
	summary: "print sizes, counts, schema version and the clock high-water mark",
	details: `
Print FILE's size and its WAL's, schema version, key and lease counts, keys
with a deadline, and the clock high-water mark against the wall clock. The
mark is the latest time a writer of the file has seen; a writer counts time
from the later of its wall clock and the mark, so a clock that stepped back
cannot shorten a live lease. When the wall clock is behind the mark by more
than the usual lead, info warns on stderr. --json prints one object.

info opens FILE read-only.`,
	example: `
$ statectl info app.state
file             app.state
size             24.0 KiB
wal              8.1 KiB
schema version   1
keys             1203 live, 1180 with a deadline, 14 expired not swept
leases           1 held, 3 names
pages            6 of 4096 bytes, 0 free
high-water mark  2026-11-30T01:18:12.574Z (0.4s ahead of the wall clock)`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		asJSON := fs.Bool("json", false, "print one JSON object")
		return func(a *app, pos, _ []string) error { return info(a, pos[0], *asJSON) }
	},
}

// infoJSON is what info --json prints.
type infoJSON struct {
	File             string    `json:"file"`
	SizeBytes        int64     `json:"size_bytes"`
	WALBytes         *int64    `json:"wal_bytes"` // null: no WAL file
	SchemaVersion    int       `json:"schema_version"`
	Keys             int64     `json:"keys"`
	KeysWithDeadline int64     `json:"keys_with_deadline"`
	ExpiredKeys      int64     `json:"expired_keys"`
	Leases           int64     `json:"leases_held"`
	LeaseNames       int64     `json:"lease_names"`
	PageSize         int64     `json:"page_size"`
	Pages            int64     `json:"pages"`
	FreePages        int64     `json:"free_pages"`
	HighWater        time.Time `json:"high_water"`
	Wall             time.Time `json:"wall"`
	ClockBehindMs    int64     `json:"clock_behind_ms"`
}

func info(a *app, path string, asJSON bool) (err error) {
	if isURL(path) {
		return infoURL(a, path, asJSON)
	}
	// Sizes first, of the files as the user left them.
	fi, err := os.Stat(path)
	if err != nil {
		return fileError(path, err)
	}
	var walBytes *int64
	// The -wal is beside the file a symbolic link names (walPath).
	switch wi, err := os.Stat(walPath(path)); {
	case err == nil:
		n := wi.Size()
		walBytes = &n
	case !errors.Is(err, fs.ErrNotExist):
		return fileError(walPath(path), err)
	}
	db, err := openRead(path)
	if err != nil {
		return err
	}
	defer closeDB(db, path, &err)
	s, err := db.Stats(context.Background())
	if err != nil {
		return fileError(path, err)
	}
	if s.ClockBehind > 0 {
		a.errorf("warning: %s: the wall clock is %s behind the file's high-water mark %s: "+
			"writers count time from the mark until the clock catches up",
			path, dur(s.HighWater.Sub(s.Wall)), s.HighWater.UTC().Format(time.RFC3339Nano))
	}
	if asJSON {
		return newJSONLines(a.stdout).write(infoJSON{
			File: path, SizeBytes: fi.Size(), WALBytes: walBytes, SchemaVersion: s.SchemaVersion,
			Keys: s.Keys, KeysWithDeadline: s.KeysWithDeadline, ExpiredKeys: s.ExpiredKeys,
			Leases: s.Leases, LeaseNames: s.LeaseNames,
			PageSize: s.PageSize, Pages: s.Pages, FreePages: s.FreePages,
			HighWater: s.HighWater.UTC(), Wall: s.Wall.UTC(), ClockBehindMs: millis(s.ClockBehind),
		})
	}
	wal := "none"
	if walBytes != nil {
		wal = size(*walBytes)
	}
	t := newTable(a.stdout, a.tty)
	t.row("file", text(path))
	t.row("size", size(fi.Size()))
	t.row("wal", wal)
	t.row("schema version", strconv.Itoa(s.SchemaVersion))
	t.row("keys", fmt.Sprintf("%d live, %d with a deadline, %d expired not swept",
		s.Keys, s.KeysWithDeadline, s.ExpiredKeys))
	t.row("leases", fmt.Sprintf("%d held, %d %s", s.Leases, s.LeaseNames, plural(s.LeaseNames, "name", "names")))
	t.row("pages", fmt.Sprintf("%d of %d bytes, %d free", s.Pages, s.PageSize, s.FreePages))
	t.row("high-water mark", highWater(s))
	return t.flush()
}

// highWater shows the mark and where the wall clock is against it.
func highWater(s state.Stats) string {
	mark := s.HighWater.UTC().Format("2006-01-02T15:04:05.000Z")
	if s.HighWater.UnixMilli() == 0 {
		return "none yet"
	}
	switch d := s.HighWater.Sub(s.Wall); {
	case d > 0:
		return fmt.Sprintf("%s (%s ahead of the wall clock)", mark, dur(d))
	case d < 0:
		return fmt.Sprintf("%s (%s behind the wall clock)", mark, dur(-d))
	}
	return mark + " (at the wall clock)"
}

// plural picks the word for n.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// infoURLJSON is what info --json prints for a store on a server.
type infoURLJSON struct {
	URL              string    `json:"url"`
	Keys             int64     `json:"keys"`
	KeysWithDeadline int64     `json:"keys_with_deadline"`
	Leases           int64     `json:"leases_held"`
	LeaseNames       int64     `json:"lease_names"`
	ServerTime       time.Time `json:"server_time"`
}

// infoURL is info for a store on a server: its counts and the server's
// time, which its deadlines follow. A server has no file sizes, pages or
// high-water mark.
func infoURL(a *app, url string, asJSON bool) (err error) {
	db, err := openRead(url)
	if err != nil {
		return err
	}
	defer closeDB(db, url, &err)
	s, err := db.Stats(context.Background())
	if err != nil {
		return fileError(url, err)
	}
	if asJSON {
		return newJSONLines(a.stdout).write(infoURLJSON{
			URL: shown(url), Keys: s.Keys, KeysWithDeadline: s.KeysWithDeadline,
			Leases: s.Leases, LeaseNames: s.LeaseNames, ServerTime: s.Now.UTC(),
		})
	}
	t := newTable(a.stdout, a.tty)
	t.row("url", text(shown(url)))
	t.row("keys", fmt.Sprintf("%d live, %d with a deadline", s.Keys, s.KeysWithDeadline))
	t.row("leases", fmt.Sprintf("%d held, %d %s", s.Leases, s.LeaseNames, plural(s.LeaseNames, "name", "names")))
	t.row("server time", s.Now.UTC().Format("2006-01-02T15:04:05.000Z"))
	return t.flush()
}
