package state

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queued returns a pending op of access a, as enqueue makes one.
func queued(a access) *pending {
	return &pending{ctx: context.Background(), a: a, wake: make(chan struct{}, 1)}
}

// TestQueueSweepBatchGetsOneTurnInSeventeen: beside a writer that always
// has a verb queued, a sweep batch at the head of the queue lets 16 groups
// (sweepPasses) go before it, then runs alone; the caller appointed to
// lead meanwhile is the verb's, and a lone batch whose turn has not come
// is appointed to nobody (its caller polls the lock).
func TestQueueSweepBatchGetsOneTurnInSeventeen(t *testing.T) {
	const passes = 16 // the documented turn: one in 17
	var q queue
	batch := queued(sweeping)
	q.push(batch)
	assert.Nil(t, q.next(), "a lone batch that no group passed yet was appointed to lead")
	for i := range passes {
		verb := queued(grouped)
		q.push(verb)
		assert.Same(t, verb, q.next(), "pass %d: the verb behind the batch is not the one to lead", i)
		assert.Equal(t, []*pending{verb}, q.take(verb), "pass %d: the verb did not go before the batch", i)
		if i < passes-1 {
			assert.Nil(t, q.next(), "pass %d: the lone batch was appointed before its turn", i)
		}
	}
	assert.Same(t, batch, q.next(), "after %d passes the batch's caller is not the one to lead", passes)
	verb := queued(grouped)
	q.push(verb)
	assert.Same(t, batch, q.next())
	assert.Equal(t, []*pending{batch}, q.take(verb), "after %d passes the batch did not run before the verb behind it", passes)
	assert.Equal(t, []*pending{verb}, q.take(verb))
	assert.False(t, q.waiting())
}

// TestQueueLeaderRunsItsOwnSweepBatch: a sweep batch's caller who holds
// the lock runs its batch at once, verbs queued behind it or not: passing
// it would make their callers wait for its thread.
func TestQueueLeaderRunsItsOwnSweepBatch(t *testing.T) {
	var q queue
	batch, verb := queued(sweeping), queued(grouped)
	q.push(batch)
	q.push(verb)
	assert.Equal(t, []*pending{batch}, q.take(batch))
	assert.Equal(t, []*pending{verb}, q.take(verb))
}

// TestQueueTakesVerbsUpToTheNextBatch: a group never takes a sweep batch
// with it, nor verbs queued behind a second batch; a batch is passed only
// by the verbs right behind it; more verbs for a group already taken (a
// nil leader) stop at a batch.
func TestQueueTakesVerbsUpToTheNextBatch(t *testing.T) {
	var q queue
	first, a, b, second, c := queued(sweeping), queued(grouped), queued(grouped), queued(sweeping), queued(grouped)
	for _, p := range []*pending{first, a, b, second, c} {
		q.push(p)
	}
	assert.Empty(t, q.takeUpTo(maxGroup, nil), "more verbs for a group were taken past a batch")
	require.Equal(t, []*pending{a, b}, q.take(a))
	assert.Equal(t, 1, first.passes)
	assert.Equal(t, []*pending{first}, q.take(c), "a batch passed with no grouped verb right behind it")
	assert.Equal(t, []*pending{c}, q.take(c), "the verb behind the second batch did not go before it")
	assert.Equal(t, 1, second.passes)
	assert.Equal(t, []*pending{second}, q.take(second))
	assert.False(t, q.waiting())
}
