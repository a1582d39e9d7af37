package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/statekit/statekit/linearizability"
)

// A fixed window's decisions are counted between power losses: one in
// flight at a loss the processes lived through (a failed sync's writes
// dropped) is counted on neither side, since the loss may have taken back
// the count it found.
func TestLimitCheckCountsNoDecisionInFlightAtALoss(t *testing.T) {
	at := int64(1_000) * int64(recipeWindow) // a window's start, engine ns
	first := decision{lim: limFixed, key: "a", n: fixedLimit, nowNanos: at, call: 5, ret: 6, allowed: true}
	for name, tc := range map[string]struct {
		call, ret int64
		fail      bool
	}{
		"before the loss, one more than the limit": {7, 9, true},
		"in flight at the loss":                    {8, 12, false},
		"after the loss":                           {11, 12, false},
	} {
		w := quietWorld(t)
		w.history = []linearizability.Op{linearizability.SurvivedLossAt(10)}
		second := decision{lim: limFixed, key: "a", n: 1, nowNanos: at + 1, call: tc.call, ret: tc.ret, allowed: true}
		w.recipes.decisions = []decision{first, second}
		w.checkRecipes()
		if tc.fail {
			assert.Equal(t, []string{CheckRateLimit}, failed(w), name)
		} else {
			assert.Empty(t, w.violations, name)
		}
	}
}
