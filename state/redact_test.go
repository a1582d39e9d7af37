package state_test

import (
	"strings"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A password holding a '/', '?' or '#' a URL must escape, or given as a
// password= parameter, stays out of Open's error too; an '@' in a query
// parameter's value is no user info.
func TestOpenNamesURLWithoutAnUnescapedPassword(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://:hun#ter2@h:1/0":                                 "redis://:xxxxx@h:1/0",
		"redis://:hun/ter2@h:1/0":                                 "redis://:xxxxx@h:1/0",
		"redis://:hun?ter2@h:1/0":                                 "redis://:xxxxx@h:1/0",
		"redis://u:hun/ter2@h:1/0":                                "redis://u:xxxxx@h:1/0",
		"redis://hun/ter2@h:1":                                    "redis://xxxxx@h:1",
		"redis://hun?ter2@h:1":                                    "redis://xxxxx@h:1",
		"redis://:hun/ter2@h:1/0?client_name=a@b":                 "redis://:xxxxx@h:1/0?client_name=a@b",
		"redis://h:1?password=hunter2":                            "redis://h:1?password=xxxxx",
		"redis://h:1/0?prefix=p&Password=hunter2&a=b":             "redis://h:1/0?prefix=p&Password=xxxxx&a=b",
		"redis://h:1/0?client_name=a@b&sentinel_password=hunter2": "redis://h:1/0?client_name=a@b&sentinel_password=xxxxx",
	} {
		_, err := state.Open(raw)
		require.Error(t, err, raw)
		assert.True(t, strings.HasPrefix(err.Error(), "open "+want+": "), "%s: %v", raw, err)
		assert.NotContains(t, err.Error(), "ter2", raw)
	}
}
