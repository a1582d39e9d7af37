// Package redisurl holds what statekit's Redis backend and the programs
// that reach the same server another way (statestress's cleanup) must read
// alike in a redis:// URL and a Redis key pattern: the query parameters
// statekit reads itself, redis-cli's rule for a lone user name, and how a
// key prefix is escaped for SCAN's MATCH.
package redisurl

import (
	"net/url"
	"strings"
)

// OwnParams are the query parameters of a redis:// or redis+cluster:// URL
// that statekit reads itself; go-redis does not know them, so they are
// stripped before go-redis parses the rest.
var OwnParams = []string{"prefix", "allow_unsafe_leases", "wait_replicas"}

// StripOwn deletes OwnParams from q.
func StripOwn(q url.Values) {
	for _, name := range OwnParams {
		q.Del(name)
	}
}

// PasswordAlone returns user as redis-cli reads it: a user name with no
// password (redis://secret@host) is the password alone, for the default
// user. A nil user stays nil.
func PasswordAlone(user *url.Userinfo) *url.Userinfo {
	if user == nil {
		return nil
	}
	if _, has := user.Password(); !has {
		return url.UserPassword("", user.Username())
	}
	return user
}

// GlobEscape escapes the characters SCAN's MATCH pattern gives meaning to,
// so that GlobEscape(prefix)+"*" matches exactly the keys that start with
// prefix.
func GlobEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
