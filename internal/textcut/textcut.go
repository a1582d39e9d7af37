// Package textcut shortens text for error messages without splitting a
// character: the recipes quote the start of a key or a value too long to
// show whole.
package textcut

import "unicode/utf8"

// Head returns the first n bytes of s (s itself when shorter), fewer where
// the cut would split a character: it backs up to the start of the
// character it falls in, at most utf8.UTFMax-1 bytes, so bytes that are
// not UTF-8 are cut too.
func Head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	return s[:n]
}
