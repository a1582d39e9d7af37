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
