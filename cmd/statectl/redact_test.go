package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMessagesHideTheCommandLinesPasswords: whatever a message is built
// from, the password of a URL given on the command line never reaches
// stderr.
func TestMessagesHideTheCommandLinesPasswords(t *testing.T) {
	var stderr bytes.Buffer
	a := &app{stderr: &stderr}
	url := "redis://:s3cretpw@127.0.0.1:6391/0?prefix=t:"
	a.hidePasswords([]string{"cas", url, "k", "x", "y"})
	a.errorf("%s: lease %q lost", url, "job")
	assert.Contains(t, stderr.String(), "statectl: redis://:xxxxx@127.0.0.1:6391/0?prefix=t:: lease \"job\" lost\n")
	assert.NotContains(t, stderr.String(), "s3cret")
	assert.Equal(t, "plain", a.redact("plain"))
}

// TestMessagesHideEveryFormOfPassword: a lone user name (which redis-cli,
// and so statekit, reads as the password), a password= parameter and a
// password holding a '/' are hidden in a message as Open's errors hide
// them.
func TestMessagesHideEveryFormOfPassword(t *testing.T) {
	for url, want := range map[string]string{
		"redis://s3cretpw@127.0.0.1:6391/0":          "redis://xxxxx@127.0.0.1:6391/0",
		"redis://127.0.0.1:6391/0?password=s3cretpw": "redis://127.0.0.1:6391/0?password=xxxxx",
		"redis://u:s3cret/pw@127.0.0.1:6391/0":       "redis://u:xxxxx@127.0.0.1:6391/0",
	} {
		var stderr bytes.Buffer
		a := &app{stderr: &stderr}
		a.hidePasswords([]string{"get", url, "k"})
		a.errorf("%s: key %q not found", url, "k")
		assert.Equal(t, "statectl: "+want+": key \"k\" not found\n", stderr.String(), url)
		assert.NotContains(t, stderr.String(), "s3cret", url)
	}
}
