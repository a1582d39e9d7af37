package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzArgs feeds statectl arbitrary command lines on a scratch file: it
// must answer 0, 1 or 2 and never panic or hang. Arguments are split on NUL;
// the first names the command and the scratch file always comes second, so
// no fuzzed argument is ever used as a path. run executes its arguments
// after "--": its fuzzed arguments end before the first "--", and the
// command it runs is always true(1), which exits 0, on a file no one else
// holds.
func FuzzArgs(f *testing.F) {
	for _, seed := range []string{
		"get\x00k", "set\x00k\x00v\x00--ttl\x001s", "set\x00n\x007\x00--int", "incr\x00n\x00--by\x00-3",
		"decr\x00n\x00--ttl\x00-1s", "cas\x00k\x00a\x00b", "cas\x00k\x00--absent\x00x", "cas\x00k\x00a\x00--delete",
		"del\x00a\x00b", "expire\x00k\x000", "ttl\x00k\x00--ms", "dump\x00--json\x00--all\x00--prefix\x00a",
		"leases\x00--all", "sweep", "info", "check", "help", "--help", "nosuch", "set\x00--ttl", "incr\x00n\x00--by\x00x",
		"set\x00k\x00\xff\xfe", "get\x00", "dump\x00--full\x00--json\x00--bogus",
		"run\x00--lease\x00job\x00--ttl\x001s", "run\x00--lease\x00\x00--wait\x00x", "run\x00--ttl\x00-1s",
		"run\x00--lease\x00job\x00--owner\x00\xff\x00--wait\x001ms", "run\x00--lease\x00j\x00--\x00false",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		parts := strings.Split(line, "\x00")
		path := filepath.Join(t.TempDir(), "fuzz.state")
		args := append([]string{parts[0], path}, parts[1:]...)
		if parts[0] == "run" {
			if i := slices.Index(args, "--"); i >= 0 {
				args = args[:i]
			}
			args = append(args, "--", "true")
		}
		a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
		switch code := a.main(args); code {
		case exitOK, 1, 2:
		default:
			t.Fatalf("statectl %q exited %d", args, code)
		}
	})
}
