package redisurl

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGlobEscapeEscapesEveryPatternCharacter(t *testing.T) {
	assert.Equal(t, `a\*b\?c\[d\]e\\f\^g\-h:`, GlobEscape(`a*b?c[d]e\f^g-h:`))
	assert.Equal(t, "plain:", GlobEscape("plain:"))
	assert.Equal(t, "", GlobEscape(""))
}

func TestPasswordAloneReadsALoneUserNameAsThePassword(t *testing.T) {
	got := PasswordAlone(url.User("secret"))
	pass, has := got.Password()
	assert.True(t, has)
	assert.Equal(t, "secret", pass)
	assert.Equal(t, "", got.Username())

	both := url.UserPassword("alice", "pw")
	assert.Same(t, both, PasswordAlone(both))
	assert.Nil(t, PasswordAlone(nil))
}

func TestStripOwnLeavesGoRedisParameters(t *testing.T) {
	q := url.Values{"prefix": {"app:"}, "allow_unsafe_leases": {"true"}, "wait_replicas": {"1"}, "pool_size": {"4"}}
	StripOwn(q)
	assert.Equal(t, url.Values{"pool_size": {"4"}}, q)
}
