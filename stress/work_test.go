package stress_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/statekit/statekit/stress"
)

// TestWorkAskedNamesOnlyWhatWasAsked: the start line and the report say
// what a run waits for, not every count with zeros.
func TestWorkAskedNamesOnlyWhatWasAsked(t *testing.T) {
	assert.Equal(t, "5000 calls, 20 kills", stress.Work{Calls: 5000, Kills: 20}.Asked())
	assert.Equal(t, "3 contended grants, 2 server kills", stress.Work{Contended: 3, ServerKills: 2}.Asked())
	assert.Equal(t, "nothing", stress.Work{}.Asked())
	assert.Equal(t, "1 calls, 2 kills, 3 grants, 4 contended grants, 5 swept keys, 6 server kills",
		stress.Work{Calls: 1, Kills: 2, Grants: 3, Contended: 4, Swept: 5, ServerKills: 6}.Asked())
}
