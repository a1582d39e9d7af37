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

// TestRedactURLHidesEveryFormOfPassword: a password after a user name, a
// lone user name (redis-cli's password), one holding an unescaped '/',
// '?' or '#', and a password= parameter all become xxxxx; nothing else
// changes, and text that is no URL is returned as it is.
func TestRedactURLHidesEveryFormOfPassword(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://user:hunter2@h:1/0":                   "redis://user:xxxxx@h:1/0",
		"redis://:hunter2@h:1/0":                       "redis://:xxxxx@h:1/0",
		"redis://hunter2@h:1/0":                        "redis://xxxxx@h:1/0",
		"rediss://u:hun/ter2@h:1/0?prefix=p:":          "rediss://u:xxxxx@h:1/0?prefix=p:",
		"redis://hun#ter2@h:1":                         "redis://xxxxx@h:1",
		"redis://u:p@ss@h:1/0":                         "redis://u:xxxxx@h:1/0", // url.Parse ends the user info at the last '@'
		"redis://h:1/0?client_name=a@b":                "redis://h:1/0?client_name=a@b",
		"redis://h:1/0?prefix=p&PASSWORD=hunter2&db=0": "redis://h:1/0?prefix=p&PASSWORD=xxxxx&db=0",
		"redis+cluster://:hunter2@a:1,b:2/?addr=c:3":   "redis+cluster://:xxxxx@a:1,b:2/?addr=c:3",
		"redis://h:1/0?sentinel_password=hunter2#frag": "redis://h:1/0?sentinel_password=xxxxx#frag",
		"/var/lib/app/state.db":                        "/var/lib/app/state.db",
	} {
		assert.Equal(t, want, RedactURL(raw), raw)
	}
}
