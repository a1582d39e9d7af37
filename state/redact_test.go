package state_test

import (
	"strings"
	"testing"
	"time"

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

// An option Open refuses (nil, or out of range) is named with the URL
// without its password, as every other error of a URL is.
func TestOpenRefusedOptionHidesThePassword(t *testing.T) {
	for name, opts := range map[string][]state.Option{
		"nil Option":         {nil},
		"negative busy wait": {state.WithBusyTimeout(-time.Second)},
		"unknown sync mode":  {state.WithSync(state.SyncMode(7))},
	} {
		for raw, want := range map[string]string{
			"redis://:hunter2@127.0.0.1:1/0?prefix=x:": "redis://:xxxxx@127.0.0.1:1/0?prefix=x:",
			"redis://127.0.0.1:1/0?password=hunter2":   "redis://127.0.0.1:1/0?password=xxxxx",
		} {
			_, err := state.Open(raw, opts...)
			require.ErrorIs(t, err, state.ErrInvalidArgument, "%s, %s", name, raw)
			assert.True(t, strings.HasPrefix(err.Error(), "open "+want+": "), "%s: %v", name, err)
			assert.NotContains(t, err.Error(), "hunter2", name)
		}
	}
}
