package textcut

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHeadCutsBetweenCharacters(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 32, "short"},
		{"abcdef", 3, "abc"},
		{"ab\u00e9", 3, "ab"},                   // é is 2 bytes: the cut backs up 1
		{"a\u20ac", 3, "a"},                     // € is 3 bytes: backs up 2
		{"a\U0001F600", 4, "a"},                 // a 4-byte character: backs up 3
		{"\xff\xfe\xfd\xfc\xfb", 2, "\xff\xfe"}, // not UTF-8: each byte starts a character
		{"\x80\x80\x80\x80\x80", 4, "\x80"},     // continuation bytes: at most 3 back
	} {
		assert.Equal(t, c.want, Head(c.s, c.n), "%q cut at %d", c.s, c.n)
	}
}
