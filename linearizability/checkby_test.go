package linearizability

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCheckByStopsAtItsDeadline: a deadline bounds the whole check, where
// the timeout bounds each partition. A deadline already passed searches
// no partition, and the verdict is Unknown, counting the partitions left
// unchecked; one far ahead checks them all, as Check does.
func TestCheckByStopsAtItsDeadline(t *testing.T) {
	history := []Op{
		do(1, 1, 2, 10, incr("a"), n(1)),
		do(1, 3, 4, 10, incr("b"), n(1)),
		do(2, 5, 6, 10, incr("c"), n(1)),
	}
	res := CheckBy(history, time.Minute, time.Now().Add(-time.Second))
	assert.Equal(t, Unknown, res.Verdict)
	assert.Equal(t, 3, res.Unchecked)
	assert.Contains(t, res.Description, "3 of 3 partitions unchecked")
	assert.Equal(t, "k:a", res.Partition, "the first unchecked")

	res = CheckBy(history, 0, time.Now().Add(time.Hour))
	assert.Equal(t, Ok, res.Verdict, res.Description)
	assert.Zero(t, res.Unchecked)
	assert.Equal(t, Check(history, 0).Verdict, res.Verdict)
}
