package backend

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUserInfoAtFindsTheAtThatEndsTheUserInfo: the '@' url.Parse would
// take when the user info is escaped, and the one after an unescaped '/',
// '?' or '#' in a password otherwise, but never one in a query value.
func TestUserInfoAtFindsTheAtThatEndsTheUserInfo(t *testing.T) {
	for _, c := range []struct {
		rest string
		want string // the text before the '@' found; "-" for none
	}{
		{"user:pw@host:6379/0", "user:pw"},
		{"secret@host", "secret"},
		{"host:6379/0", "-"},
		{"host:6379", "-"},
		{"user:p/w@host:6379/0", "user:p/w"},
		{"user:p?w@host:6379", "user:p?w"},
		{"user:p#w@host", "user:p#w"},
		{"host:6379/0?client_name=a@b", "-"},
		{"user:pw@host:6379/0?client_name=a@b", "user:pw"},
		{"user:p/w@host:6379/0?client_name=a@b", "user:p/w"},
		{"host/0?x=1&client_name=a@b", "-"},
		{"user:a@b@host", "user:a@b"},
	} {
		at := UserInfoAt(c.rest)
		got := "-"
		if at >= 0 {
			got = c.rest[:at]
			assert.Equal(t, "@", c.rest[at:at+1], c.rest)
		}
		assert.Equal(t, c.want, got, "%s", c.rest)
	}
}
