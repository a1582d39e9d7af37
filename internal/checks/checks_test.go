package checks

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
)

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

func TestErrKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind model.ErrKind
		ok   bool
	}{
		{nil, model.ErrNone, true},
		{state.ErrNotFound, model.ErrNotFound, true},
		{fmt.Errorf("get %q: %w", "k", state.ErrNotFound), model.ErrNotFound, true},
		{state.ErrNotInteger, model.ErrNotInteger, true},
		{state.ErrOverflow, model.ErrOverflow, true},
		{&state.LeaseHeldError{Name: "l", Owner: "o"}, model.ErrLeaseHeld, true},
		{state.ErrLeaseLost, model.ErrLeaseLost, true},
		{state.ErrInvalidKey, model.ErrInvalid, true},
		{state.ErrInvalidValue, model.ErrInvalid, true},
		{state.ErrInvalidTTL, model.ErrInvalid, true},
		{state.ErrInvalidArgument, model.ErrInvalid, true},
		// Not the model's: the safe answer is unknown, to be reported.
		{state.ErrIO, 0, false},
		{fmt.Errorf("%w (cause: %w)", state.ErrIO, state.ErrNotFound), 0, false},
		{state.ErrDiskFull, 0, false},
		{state.ErrBusy, 0, false},
		{state.ErrClosed, 0, false},
		{state.ErrCorrupt, 0, false},
		{context.Canceled, 0, false},
		{fmt.Errorf("statekit: %w", context.DeadlineExceeded), 0, false},
		{errors.New("something nobody expected"), 0, false},
		{&state.FlushError{Dropped: map[string]error{"a": state.ErrNotInteger}}, 0, false},
	} {
		kind, ok := ErrKind(tc.err)
		assert.Equal(t, tc.ok, ok, "%v", tc.err)
		if ok {
			assert.Equal(t, tc.kind, kind, "%v", tc.err)
		}
	}
}

// lease is a recorded grant (token > 0) or refusal (token 0) of lease L.
func lease(client int, owner string, token, call, ret int64) linearizability.Op {
	op := linearizability.Op{Client: client, Call: call, Return: ret,
		Input:  model.Input{Kind: model.Lease, Key: "L", Owner: owner, TTLMillis: 100},
		Output: model.Output{Token: token}}
	if token == 0 {
		op.Output = model.Output{Err: model.ErrLeaseHeld, Owner: "x"}
	}
	return op
}

// updateLease is an Update that asks for lease L inside, answering err for
// the whole and token for the grant.
func updateLease(client int, owner string, token, call, ret int64, err model.ErrKind) linearizability.Op {
	return linearizability.Op{Client: client, Call: call, Return: ret,
		Input: model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.Get, Key: "a"},
			{Kind: model.Lease, Key: "L", Owner: owner, TTLMillis: 100}}, Abort: err == model.ErrAborted},
		Output: model.Output{Err: err, Sub: []model.Output{{Err: model.ErrNotFound}, {Token: token}}}}
}

func TestGrantsCountsUpdatesThatCommitted(t *testing.T) {
	unknown := lease(5, "e", 9, 50, 60)
	unknown.Unknown = true
	gs := Grants([]linearizability.Op{
		lease(1, "a", 1, 0, 10),
		lease(2, "b", 0, 5, 15), // refused
		updateLease(3, "c", 2, 20, 30, model.ErrNone),
		updateLease(4, "d", 3, 40, 45, model.ErrAborted), // rolled back
		unknown,
	})
	assert.Equal(t, []Grant{
		{Name: "L", Owner: "a", Client: 1, Token: 1, Call: 0, Return: 10, Index: 0},
		{Name: "L", Owner: "c", Client: 3, Token: 2, Call: 20, Return: 30, Index: 2, InUpdate: true},
	}, gs)
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history []linearizability.Op
		want    []string
	}{
		{"extensions and overlaps are fine", []linearizability.Op{
			lease(1, "a", 1, 0, 10),
			lease(1, "a", 1, 20, 30), // the same owner again: same token
			lease(2, "b", 3, 40, 60),
			lease(3, "c", 2, 35, 70), // overlaps the grant of 3: may be older
			updateLease(4, "d", 4, 80, 90, model.ErrNone),
		}, nil},
		{"one token, two owners", []linearizability.Op{
			lease(1, "a", 1, 0, 10), lease(2, "b", 1, 5, 15), lease(1, "a", 2, 20, 30),
		}, []string{KindDuplicateToken}},
		{"one token, two owners, one inside an Update", []linearizability.Op{
			lease(1, "a", 4, 0, 10), updateLease(2, "b", 4, 5, 15, model.ErrNone),
		}, []string{KindDuplicateToken}},
		{"an aborted Update's token is not a grant", []linearizability.Op{
			lease(1, "a", 4, 0, 10), updateLease(2, "b", 4, 5, 15, model.ErrAborted),
		}, nil},
		{"a token going down", []linearizability.Op{
			lease(1, "a", 5, 0, 10), lease(2, "b", 4, 20, 30),
		}, []string{KindTokenOrder}},
		{"a token going down after an Update's grant", []linearizability.Op{
			updateLease(1, "a", 5, 0, 10, model.ErrNone), lease(2, "b", 4, 20, 30),
		}, []string{KindTokenOrder}},
		{"touching intervals are concurrent", []linearizability.Op{
			lease(1, "a", 5, 0, 10), lease(2, "b", 4, 10, 30),
		}, nil},
	} {
		assert.Equal(t, tc.want, kinds(Tokens(Grants(tc.history))), tc.name)
	}
}

func TestFence(t *testing.T) {
	grants := Grants([]linearizability.Op{lease(1, "a", 1, 0, 1), lease(2, "b", 1, 0, 1), lease(3, "c", 2, 2, 3)})
	acc, ref, vs := Fence([]FenceWrite{
		{Name: "L", Holder: "a", Token: 1, Accepted: true},
		{Name: "L", Holder: "c", Token: 2, Accepted: true},
		{Name: "L", Holder: "b", Token: 1},
	}, grants)
	assert.Empty(t, vs)
	assert.Equal(t, 2, acc)
	assert.Equal(t, 1, ref)

	for _, tc := range []struct {
		name   string
		writes []FenceWrite
		want   []string
	}{
		{"two holders", []FenceWrite{{Name: "L", Holder: "a", Token: 1, Accepted: true}, {Name: "L", Holder: "b", Token: 1, Accepted: true}},
			[]string{KindDuplicateToken}},
		{"never granted", []FenceWrite{{Name: "L", Holder: "a", Token: 7, Accepted: true}}, []string{KindFence}},
		{"granted to someone else", []FenceWrite{{Name: "L", Holder: "a", Token: 2, Accepted: true}}, []string{KindFence}},
		{"going down", []FenceWrite{{Name: "L", Holder: "c", Token: 2, Accepted: true}, {Name: "L", Holder: "a", Token: 1, Accepted: true}},
			[]string{KindTokenOrder}},
	} {
		_, _, vs := Fence(tc.writes, grants)
		assert.Equal(t, tc.want, kinds(vs), tc.name)
	}
}

// incr is a recorded +delta on counter n.
func incr(client int, delta, answer, call, ret int64) linearizability.Op {
	return linearizability.Op{Client: client, Call: call, Return: ret,
		Input: model.Input{Kind: model.IncrBy, Key: "n", Delta: delta}, Output: model.Output{Int: answer}}
}

func unknown(op linearizability.Op) linearizability.Op {
	op.Unknown = true
	op.Output = model.Output{}
	return op
}

// flush is a recorded flush of delta on n and 1 on another key.
func flush(client int, delta, call, ret int64, err model.ErrKind) linearizability.Op {
	return linearizability.Op{Client: client, Call: call, Return: ret,
		Input: model.Input{Kind: model.Flush, Ops: []model.Input{
			{Kind: model.IncrBy, Key: "m", Delta: 1}, {Kind: model.IncrBy, Key: "n", Delta: delta}}},
		Output: model.Output{Sub: []model.Output{{}, {Err: err}}}}
}

func TestCounterBounds(t *testing.T) {
	history := []linearizability.Op{
		incr(1, 1, 1, 0, 10),
		incr(2, 1, 2, 5, 15),
		unknown(incr(3, 1, 0, 20, 30)),
		flush(4, 3, 40, 50, model.ErrNone),
		flush(4, 5, 60, 70, model.ErrNotInteger), // dropped: not counted
		unknown(flush(4, 2, 80, 90, model.ErrNone)),
		{Client: 5, Call: 95, Return: 99, Input: model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.IncrBy, Key: "n", Delta: 1}}}, Output: model.Output{Sub: []model.Output{{Int: 6}}}},
	}
	// Acknowledged: 1+1+3+1 = 6; may have applied: 6 + 1 + 2 = 9.
	for final := int64(4); final <= 10; final++ {
		vs := Counter(history, "n", final)
		if final >= 6 && final <= 9 {
			assert.Empty(t, vs, "final %d", final)
		} else {
			assert.Contains(t, fmt.Sprint(vs), fmt.Sprintf("ended at %d; want 6..9", final))
		}
	}
}

func TestCounterAnswers(t *testing.T) {
	vs := Counter([]linearizability.Op{incr(1, 1, 1, 0, 10), incr(2, 1, 1, 5, 15)}, "n", 2)
	assert.Equal(t, []string{KindCounter}, kinds(vs), "two increments answered 1")
	vs = Counter([]linearizability.Op{incr(1, 1, 1, 0, 10), incr(2, 1, 5, 5, 15)}, "n", 2)
	assert.Equal(t, []string{KindCounter}, kinds(vs), "an answer above the final value")
	vs = Counter([]linearizability.Op{incr(1, 0, 0, 0, 10), incr(2, 0, 0, 5, 15)}, "n", 0)
	assert.Empty(t, vs, "adding zero twice answers the same value")
}

func TestCounterWithPowerLosses(t *testing.T) {
	grant := lease(9, "a", 1, 20, 25)
	grant.Durability = linearizability.Full
	history := []linearizability.Op{
		incr(1, 1, 1, 0, 10),  // made durable by the grant
		grant,                 // a FULL commit that began after it returned
		incr(1, 1, 2, 30, 40), // lost to the power loss: nothing durable after it
		linearizability.PowerLossAt(50),
		incr(1, 1, 2, 60, 70), // answers 2 again, in a new era
	}
	assert.Empty(t, Counter(history, "n", 2))
	assert.Empty(t, Counter(history, "n", 3), "the lost increment may have survived")
	assert.Equal(t, []string{KindCounter}, kinds(Counter(history, "n", 4)), "more than was attempted")
	assert.Equal(t, []string{KindCounter, KindCounter}, kinds(Counter(history, "n", 1)),
		"the durable increment was lost, and the last answer is above the final value")

	// Before a power loss, an increment counts only if a durable point
	// followed it.
	lost := []linearizability.Op{history[0], history[2], linearizability.PowerLossAt(50)}
	assert.Empty(t, Counter(lost, "n", 0), "nothing durable: both may be lost")
	withGrant := []linearizability.Op{history[0], grant, history[2], linearizability.PowerLossAt(50)}
	assert.Equal(t, []string{KindCounter}, kinds(Counter(withGrant, "n", 0)), "the grant made the first durable")
	withEvent := []linearizability.Op{history[0], linearizability.DurableWithin(20, 25), history[2], linearizability.PowerLossAt(50)}
	assert.Equal(t, []string{KindCounter}, kinds(Counter(withEvent, "n", 0)), "a durable event is a durable point")
	refused := lease(9, "a", 0, 20, 25)
	refused.Durability = linearizability.Full
	withRefusal := []linearizability.Op{history[0], refused, history[2], linearizability.PowerLossAt(50)}
	assert.Empty(t, Counter(withRefusal, "n", 0), "a refused grant wrote nothing and synced nothing")
	overlapping := lease(9, "a", 1, 5, 25)
	overlapping.Durability = linearizability.Full
	withOverlap := []linearizability.Op{history[0], overlapping, history[2], linearizability.PowerLossAt(50)}
	assert.Empty(t, Counter(withOverlap, "n", 0), "a grant that began before the increment returned may have synced before it")
}

func TestCounterRefusesOtherVerbs(t *testing.T) {
	vs := Counter([]linearizability.Op{incr(1, 1, 1, 0, 10),
		{Client: 2, Call: 20, Return: 30, Input: model.Input{Kind: model.Set, Key: "n", Value: model.Int(9)}}}, "n", 9)
	assert.Contains(t, kinds(vs), KindCounter)
	vs = Counter([]linearizability.Op{incr(1, -1, -1, 0, 10)}, "n", -1)
	assert.Contains(t, kinds(vs), KindCounter, "a negative delta")
}

// TestCounterLetsReadsThrough: a read of a counter key (a stress run's
// read-only worker reads and lists them) changes nothing, so the bounds stand; the
// linearizability check holds its answer.
func TestCounterLetsReadsThrough(t *testing.T) {
	history := []linearizability.Op{incr(1, 1, 1, 0, 10),
		{Client: 2, Call: 5, Return: 15, Input: model.Input{Kind: model.Get, Key: "n"}, Output: model.Output{Value: model.Int(1)}},
		{Client: 2, Call: 20, Return: 30, Input: model.Input{Kind: model.TTL, Key: "n"}, Output: model.Output{TTLMillis: -1}},
		// statectl dump --prefix n: a listing whose prefix is the key
		{Client: 2, Call: 31, Return: 32, Input: model.Input{Kind: model.Scan, Key: "n"},
			Output: model.Output{Rows: []model.KeyRow{{Key: "n", Entry: model.Entry{Value: model.Int(1)}}}}},
		incr(3, 1, 2, 40, 50)}
	assert.Empty(t, Counter(history, "n", 2))
	assert.Equal(t, []string{KindCounter}, kinds(Counter(history, "n", 3)), "the bounds still hold")
}

func TestBuffered(t *testing.T) {
	buffered := map[string]int64{"a": 3, "b": 1}
	assert.Empty(t, Buffered("p1", buffered, map[string]int64{"a": 3, "b": 1}, true))
	assert.Empty(t, Buffered("p1", buffered, map[string]int64{"a": 2}, false), "a crash loses what was buffered")
	assert.Equal(t, []string{KindBuffered}, kinds(Buffered("p1", buffered, map[string]int64{"a": 2, "b": 1}, true)), "a clean close writes everything")
	assert.Equal(t, []string{KindBuffered}, kinds(Buffered("p1", buffered, map[string]int64{"a": 4, "b": 1}, false)), "more than buffered")
	assert.Equal(t, []string{KindBuffered}, kinds(Buffered("p1", buffered, map[string]int64{"a": 3, "b": 1, "c": 1}, false)), "a key never buffered")
}

func TestFlushTaken(t *testing.T) {
	restored := flush(4, 0, 1, 2, model.ErrNone)
	restored.Input.Ops = nil
	history := []linearizability.Op{flush(4, 3, 0, 1, model.ErrNone), unknown(flush(4, 2, 3, 4, model.ErrNone)),
		restored, flush(5, 7, 0, 1, model.ErrNone), incr(4, 1, 1, 5, 6)}
	assert.Equal(t, map[string]int64{"m": 2, "n": 5}, FlushTaken(history, func(c int) bool { return c == 4 }))
}

// at is an op of one process that ran at engine time now within [call, ret]
// (nanoseconds).
func at(now, call, ret int64) linearizability.Op {
	return linearizability.Op{Client: 1, Call: call, Return: ret, Input: model.Input{Kind: model.Get, Key: "a", NowMillis: now}}
}

func TestClockOffset(t *testing.T) {
	const ms = int64(1e6)
	// Engine time = mono/ms + 1000, read somewhere inside each call.
	good := Process{Name: "p1", Ops: []linearizability.Op{
		at(1000, 0, ms/2),
		at(1005, 5*ms-10, 5*ms+10),
		at(1020, 20*ms+ms/2, 22*ms), // read before 21 ms
		unknown(at(1030, 30*ms, 0)), // open: bounds only from above
	}}
	good.Ops[3].Input.NowMillis = 1030
	assert.Empty(t, ClockOffset(good, ms))

	drifted := Process{Name: "p1", Ops: []linearizability.Op{at(1000, 0, ms/2), at(1007, 5*ms, 5*ms+ms/2)}}
	assert.Equal(t, []string{KindClock}, kinds(ClockOffset(drifted, ms)), "2 ms ahead of the monotonic clock")
	behind := Process{Name: "p1", Ops: []linearizability.Op{at(1000, 0, ms/2), at(1003, 5*ms, 6*ms)}}
	assert.Equal(t, []string{KindClock}, kinds(ClockOffset(behind, ms)), "1 ms behind it")
	// A millisecond boundary inside the call allows either reading.
	edge := Process{Name: "p1", Ops: []linearizability.Op{at(1000, 0, ms/2), at(1005, 5*ms-ms/2, 5*ms+ms/2), at(1004, 5*ms-ms/2, 5*ms+ms/2)}}
	assert.Empty(t, ClockOffset(edge, ms))
}

func TestClockNeverBack(t *testing.T) {
	p1 := Process{Name: "p1", Start: 0, Ops: []linearizability.Op{at(1000, 10, 20), at(1500, 30, 40)}}
	p2 := Process{Name: "p2", Start: 50, Ops: []linearizability.Op{at(1500, 60, 70)}}
	p3 := Process{Name: "p3", Start: 35, Ops: []linearizability.Op{at(1200, 60, 70)}} // started before p1's 1500 returned
	assert.Empty(t, ClockNeverBack([]Process{p1, p2, p3}))

	back := Process{Name: "p4", Start: 50, Ops: []linearizability.Op{at(1499, 60, 70), at(1600, 80, 90)}}
	vs := ClockNeverBack([]Process{p1, back})
	assert.Equal(t, []string{KindClock}, kinds(vs))
	assert.Contains(t, vs[0].Detail, "p4")

	// A call cut by a kill may have claimed its time and died before the
	// mark that covers it was written: it used nothing a successor must
	// start after. Its successor's own cut calls are held to the rule.
	cut := at(1700, 30, 45)
	cut.Unknown = true
	p5 := Process{Name: "p5", Start: 0, Ops: []linearizability.Op{at(1000, 10, 20), cut}}
	p6 := Process{Name: "p6", Start: 50, Ops: []linearizability.Op{at(1650, 60, 70)}}
	assert.Empty(t, ClockNeverBack([]Process{p5, p6}))
	behind := at(999, 60, 0)
	behind.Unknown = true
	p7 := Process{Name: "p7", Start: 50, Ops: []linearizability.Op{behind}}
	assert.Equal(t, []string{KindClock}, kinds(ClockNeverBack([]Process{p5, p7})), "an unknown op of a later process behind a known time")
}

// TestClockNeverBackLeavesReadOnlyTimesOut: a read-only handle writes no
// high-water mark, so a time it used binds no later process. One that
// started from a killed writer's mark, ahead of the wall clock, reads
// ahead of it, and a writer that opens later at the wall clock starts
// behind that: no violation. The reader's own calls are still held to the
// times writers used before it started.
func TestClockNeverBackLeavesReadOnlyTimesOut(t *testing.T) {
	w1 := Process{Name: "w1", Start: 0, Ops: []linearizability.Op{at(1000, 10, 20)}}
	reader := Process{Name: "r1", Start: 30, ReadOnly: true, Ops: []linearizability.Op{at(1500, 40, 50)}}
	w2 := Process{Name: "w2", Start: 60, Ops: []linearizability.Op{at(1200, 70, 80)}}
	assert.Empty(t, ClockNeverBack([]Process{w1, reader, w2}))

	writer := reader
	writer.ReadOnly = false
	vs := ClockNeverBack([]Process{w1, writer, w2})
	assert.Equal(t, []string{KindClock}, kinds(vs), "the same times from a writable handle")
	if assert.Len(t, vs, 1) {
		assert.Contains(t, vs[0].Detail, "w2")
	}

	behind := Process{Name: "r2", Start: 30, ReadOnly: true, Ops: []linearizability.Op{at(999, 40, 50)}}
	vs = ClockNeverBack([]Process{w1, behind})
	assert.Equal(t, []string{KindClock}, kinds(vs), "a reader behind a time a writer used before it started")
	if assert.Len(t, vs, 1) {
		assert.Contains(t, vs[0].Detail, "r2")
	}
}
