package main

import (
	"flag"
	"strconv"
	"strings"

	"github.com/statekit/statekit/internal/backend"
)

// notForRerun are the flags that do not change what a run does.
var notForRerun = map[string]bool{"seed": true, "dir": true, "keep": true, "v": true}

// rerunLine returns a command line that runs the same workload again:
// seed, then every flag given but those of notForRerun (a -redis-url
// with its password left out).
func rerunLine(fs *flag.FlagSet, seed uint64) string {
	words := []string{"statestress", "-seed", strconv.FormatUint(seed, 10)}
	fs.Visit(func(f *flag.Flag) {
		if notForRerun[f.Name] {
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if f.Value.String() == "true" {
				words = append(words, "-"+f.Name)
			} else {
				words = append(words, "-"+f.Name+"="+f.Value.String())
			}
			return
		}
		v := f.Value.String()
		if f.Name == "redis-url" {
			v = backend.RedactURL(v) // no password in a CI log
		}
		words = append(words, "-"+f.Name, shellQuote(v))
	})
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=@+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
