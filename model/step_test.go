package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const now = int64(1_000_000)

// st builds a State from key rows and lease rows.
func st(kv map[string]Entry, leases map[string]LeaseRow) State {
	s := NewState()
	for k, e := range kv {
		s.KV[k] = e
	}
	for k, l := range leases {
		s.Leases[k] = l
	}
	return s
}

type stepCase struct {
	name    string
	state   State
	in      Input
	want    State
	wantOut Output
}

func runSteps(t *testing.T, cases []stepCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.in.NowMillis == 0 {
				c.in.NowMillis = now
			}
			before := c.state.Clone()
			got, out := Step(c.state, c.in)
			assert.True(t, Equal(c.want, got), "state: want %s, got %s", c.want, got)
			assert.True(t, c.wantOut.Equal(out), "output: want %s, got %s", c.wantOut, out)
			assert.True(t, Equal(before, c.state), "Step modified its input state")
		})
	}
}

var (
	i7    = Entry{Value: Int(7)}
	b7    = Entry{Value: Bytes("7")}
	i7exp = Entry{Value: Int(7), ExpiresAt: now + 500}
	dead  = Entry{Value: Int(7), ExpiresAt: now} // expires exactly now
)

func TestGet(t *testing.T) {
	runSteps(t, []stepCase{
		{"live int", st(map[string]Entry{"a": i7}, nil), Input{Kind: Get, Key: "a"}, st(map[string]Entry{"a": i7}, nil), Output{Value: Int(7)}},
		{"live bytes", st(map[string]Entry{"a": b7}, nil), Input{Kind: Get, Key: "a"}, st(map[string]Entry{"a": b7}, nil), Output{Value: Bytes("7")}},
		{"absent", NewState(), Input{Kind: Get, Key: "a"}, NewState(), Output{Err: ErrNotFound}},
		{"deadline one ms ahead is live", st(map[string]Entry{"a": {Value: Int(7), ExpiresAt: now + 1}}, nil), Input{Kind: Get, Key: "a"},
			st(map[string]Entry{"a": {Value: Int(7), ExpiresAt: now + 1}}, nil), Output{Value: Int(7)}},
		{"deadline exactly now is expired, row kept", st(map[string]Entry{"a": dead}, nil), Input{Kind: Get, Key: "a"},
			st(map[string]Entry{"a": dead}, nil), Output{Err: ErrNotFound}},
		{"lease namespace is separate", st(nil, map[string]LeaseRow{"a": {Owner: "o", Token: 1, ExpiresAt: now + 10}}), Input{Kind: Get, Key: "a"},
			st(nil, map[string]LeaseRow{"a": {Owner: "o", Token: 1, ExpiresAt: now + 10}}), Output{Err: ErrNotFound}},
		{"empty key", NewState(), Input{Kind: Get}, NewState(), Output{Err: ErrInvalid}},
	})
}

func TestSet(t *testing.T) {
	runSteps(t, []stepCase{
		{"new without ttl", NewState(), Input{Kind: Set, Key: "a", Value: Int(7)}, st(map[string]Entry{"a": i7}, nil), Output{}},
		{"new with ttl", NewState(), Input{Kind: Set, Key: "a", Value: Int(7), TTLMillis: 500}, st(map[string]Entry{"a": i7exp}, nil), Output{}},
		{"replaces type and drops ttl", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: Set, Key: "a", Value: Bytes("7")},
			st(map[string]Entry{"a": b7}, nil), Output{}},
		{"negative ttl means none", NewState(), Input{Kind: Set, Key: "a", Value: Int(7), TTLMillis: -5}, st(map[string]Entry{"a": i7}, nil), Output{}},
		{"empty bytes value", NewState(), Input{Kind: Set, Key: "a", Value: Bytes("")}, st(map[string]Entry{"a": {Value: Bytes("")}}, nil), Output{}},
		{"over an expired row", st(map[string]Entry{"a": dead}, nil), Input{Kind: Set, Key: "a", Value: Bytes("x")},
			st(map[string]Entry{"a": {Value: Bytes("x")}}, nil), Output{}},
		{"empty key", NewState(), Input{Kind: Set, Value: Int(1)}, NewState(), Output{Err: ErrInvalid}},
	})
}

func TestDel(t *testing.T) {
	two := map[string]Entry{"a": i7, "b": b7}
	runSteps(t, []stepCase{
		{"both live", st(two, nil), Input{Kind: Del, Keys: []string{"a", "b"}}, NewState(), Output{N: 2}},
		{"one absent", st(map[string]Entry{"a": i7}, nil), Input{Kind: Del, Keys: []string{"a", "z"}}, NewState(), Output{N: 1}},
		{"repeated key counts once", st(two, nil), Input{Kind: Del, Keys: []string{"a", "a"}}, st(map[string]Entry{"b": b7}, nil), Output{N: 1}},
		{"expired row deleted, not counted", st(map[string]Entry{"a": dead, "b": b7}, nil), Input{Kind: Del, Keys: []string{"a"}},
			st(map[string]Entry{"b": b7}, nil), Output{N: 0}},
		{"no keys", st(two, nil), Input{Kind: Del}, st(two, nil), Output{}},
		{"empty key refused", st(two, nil), Input{Kind: Del, Keys: []string{"a", ""}}, st(two, nil), Output{Err: ErrInvalid}},
	})
}

func TestIncrBy(t *testing.T) {
	runSteps(t, []stepCase{
		{"absent creates with delta", NewState(), Input{Kind: IncrBy, Key: "a", Delta: 5}, st(map[string]Entry{"a": {Value: Int(5)}}, nil), Output{Int: 5}},
		{"absent with ttl", NewState(), Input{Kind: IncrBy, Key: "a", Delta: -1, TTLMillis: 500},
			st(map[string]Entry{"a": {Value: Int(-1), ExpiresAt: now + 500}}, nil), Output{Int: -1}},
		{"expired starts over with ttl", st(map[string]Entry{"a": {Value: Int(100), ExpiresAt: now}}, nil), Input{Kind: IncrBy, Key: "a", Delta: 1, TTLMillis: 10},
			st(map[string]Entry{"a": {Value: Int(1), ExpiresAt: now + 10}}, nil), Output{Int: 1}},
		{"expired bytes starts over", st(map[string]Entry{"a": {Value: Bytes("x"), ExpiresAt: now - 1}}, nil), Input{Kind: IncrBy, Key: "a", Delta: 1},
			st(map[string]Entry{"a": {Value: Int(1)}}, nil), Output{Int: 1}},
		{"live keeps deadline, ttl ignored", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: IncrBy, Key: "a", Delta: 3, TTLMillis: 99_999},
			st(map[string]Entry{"a": {Value: Int(10), ExpiresAt: now + 500}}, nil), Output{Int: 10}},
		{"live without deadline stays without", st(map[string]Entry{"a": i7}, nil), Input{Kind: IncrBy, Key: "a", Delta: 1, TTLMillis: 10},
			st(map[string]Entry{"a": {Value: Int(8)}}, nil), Output{Int: 8}},
		{"bytes is not an integer", st(map[string]Entry{"a": b7}, nil), Input{Kind: IncrBy, Key: "a", Delta: 1},
			st(map[string]Entry{"a": b7}, nil), Output{Err: ErrNotInteger}},
		{"max int64 reachable", st(map[string]Entry{"a": {Value: Int(math.MaxInt64 - 1)}}, nil), Input{Kind: IncrBy, Key: "a", Delta: 1},
			st(map[string]Entry{"a": {Value: Int(math.MaxInt64)}}, nil), Output{Int: math.MaxInt64}},
		{"overflow up", st(map[string]Entry{"a": {Value: Int(math.MaxInt64)}}, nil), Input{Kind: IncrBy, Key: "a", Delta: 1},
			st(map[string]Entry{"a": {Value: Int(math.MaxInt64)}}, nil), Output{Err: ErrOverflow}},
		{"min int64 reachable", st(map[string]Entry{"a": {Value: Int(-1)}}, nil), Input{Kind: IncrBy, Key: "a", Delta: math.MinInt64 + 1},
			st(map[string]Entry{"a": {Value: Int(math.MinInt64)}}, nil), Output{Int: math.MinInt64}},
		{"overflow down", st(map[string]Entry{"a": {Value: Int(math.MinInt64)}}, nil), Input{Kind: IncrBy, Key: "a", Delta: -1},
			st(map[string]Entry{"a": {Value: Int(math.MinInt64)}}, nil), Output{Err: ErrOverflow}},
		{"overflow with large negative delta", st(map[string]Entry{"a": {Value: Int(-2)}}, nil), Input{Kind: IncrBy, Key: "a", Delta: math.MinInt64},
			st(map[string]Entry{"a": {Value: Int(-2)}}, nil), Output{Err: ErrOverflow}},
		{"absent with min int64 delta", NewState(), Input{Kind: IncrBy, Key: "a", Delta: math.MinInt64},
			st(map[string]Entry{"a": {Value: Int(math.MinInt64)}}, nil), Output{Int: math.MinInt64}},
		{"zero delta on live int", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: IncrBy, Key: "a"}, st(map[string]Entry{"a": i7exp}, nil), Output{Int: 7}},
	})
}

func TestCAS(t *testing.T) {
	runSteps(t, []stepCase{
		{"match swaps", st(map[string]Entry{"a": i7}, nil), Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7)), New: Ptr(Int(8))},
			st(map[string]Entry{"a": {Value: Int(8)}}, nil), Output{OK: true}},
		{"type mismatch int vs bytes", st(map[string]Entry{"a": i7}, nil), Input{Kind: CAS, Key: "a", Expected: Ptr(Bytes("7")), New: Ptr(Int(8))},
			st(map[string]Entry{"a": i7}, nil), Output{}},
		{"type mismatch bytes vs int", st(map[string]Entry{"a": b7}, nil), Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7)), New: Ptr(Int(8))},
			st(map[string]Entry{"a": b7}, nil), Output{}},
		{"swap keeps deadline", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7)), New: Ptr(Bytes("x"))},
			st(map[string]Entry{"a": {Value: Bytes("x"), ExpiresAt: now + 500}}, nil), Output{OK: true}},
		{"nil expected matches absent", NewState(), Input{Kind: CAS, Key: "a", New: Ptr(Int(1))},
			st(map[string]Entry{"a": {Value: Int(1)}}, nil), Output{OK: true}},
		{"nil expected matches expired, no deadline kept", st(map[string]Entry{"a": dead}, nil), Input{Kind: CAS, Key: "a", New: Ptr(Int(1))},
			st(map[string]Entry{"a": {Value: Int(1)}}, nil), Output{OK: true}},
		{"nil expected fails on live", st(map[string]Entry{"a": i7}, nil), Input{Kind: CAS, Key: "a", New: Ptr(Int(1))},
			st(map[string]Entry{"a": i7}, nil), Output{}},
		{"expected value fails on expired", st(map[string]Entry{"a": dead}, nil), Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7)), New: Ptr(Int(1))},
			st(map[string]Entry{"a": dead}, nil), Output{}},
		{"expected value fails on absent", NewState(), Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7)), New: Ptr(Int(1))}, NewState(), Output{}},
		{"nil new deletes", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7))}, NewState(), Output{OK: true}},
		{"nil expected, nil new on expired is a check: the row stays", st(map[string]Entry{"a": dead}, nil), Input{Kind: CAS, Key: "a"}, st(map[string]Entry{"a": dead}, nil), Output{OK: true}},
		{"empty bytes is not absent", st(map[string]Entry{"a": {Value: Bytes("")}}, nil), Input{Kind: CAS, Key: "a", New: Ptr(Int(1))},
			st(map[string]Entry{"a": {Value: Bytes("")}}, nil), Output{}},
	})
}

func TestExpire(t *testing.T) {
	runSteps(t, []stepCase{
		{"live gets deadline", st(map[string]Entry{"a": i7}, nil), Input{Kind: Expire, Key: "a", TTLMillis: 500},
			st(map[string]Entry{"a": i7exp}, nil), Output{OK: true}},
		{"live deadline replaced", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: Expire, Key: "a", TTLMillis: 50},
			st(map[string]Entry{"a": {Value: Int(7), ExpiresAt: now + 50}}, nil), Output{OK: true}},
		{"absent false", NewState(), Input{Kind: Expire, Key: "a", TTLMillis: 500}, NewState(), Output{}},
		{"expired false, row untouched", st(map[string]Entry{"a": dead}, nil), Input{Kind: Expire, Key: "a", TTLMillis: 500},
			st(map[string]Entry{"a": dead}, nil), Output{}},
		{"zero ttl deletes live", st(map[string]Entry{"a": i7}, nil), Input{Kind: Expire, Key: "a"}, NewState(), Output{OK: true}},
		{"negative ttl deletes live", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: Expire, Key: "a", TTLMillis: -1}, NewState(), Output{OK: true}},
		{"zero ttl on expired deletes, false", st(map[string]Entry{"a": dead}, nil), Input{Kind: Expire, Key: "a"}, NewState(), Output{}},
		{"zero ttl on absent false", NewState(), Input{Kind: Expire, Key: "a"}, NewState(), Output{}},
	})
}

func TestTTL(t *testing.T) {
	runSteps(t, []stepCase{
		{"absent", NewState(), Input{Kind: TTL, Key: "a"}, NewState(), Output{Err: ErrNotFound}},
		{"no deadline", st(map[string]Entry{"a": i7}, nil), Input{Kind: TTL, Key: "a"}, st(map[string]Entry{"a": i7}, nil), Output{TTLMillis: NoExpiry}},
		{"time left", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: TTL, Key: "a"}, st(map[string]Entry{"a": i7exp}, nil), Output{TTLMillis: 500}},
		{"one ms left", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: TTL, Key: "a", NowMillis: now + 499},
			st(map[string]Entry{"a": i7exp}, nil), Output{TTLMillis: 1}},
		{"at the deadline absent", st(map[string]Entry{"a": i7exp}, nil), Input{Kind: TTL, Key: "a", NowMillis: now + 500},
			st(map[string]Entry{"a": i7exp}, nil), Output{Err: ErrNotFound}},
	})
}

func TestLease(t *testing.T) {
	held := LeaseRow{Owner: "o1", Token: 3, ExpiresAt: now + 100}
	runSteps(t, []stepCase{
		{"first grant is token 1", NewState(), Input{Kind: Lease, Key: "l", Owner: "o1", TTLMillis: 100},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 1, ExpiresAt: now + 100}}), Output{Token: 1, ExpiresAt: now + 100}},
		{"same owner while live: same token, new deadline, extended", st(nil, map[string]LeaseRow{"l": held}), Input{Kind: Lease, Key: "l", Owner: "o1", TTLMillis: 300},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3, ExpiresAt: now + 300}}), Output{Token: 3, ExpiresAt: now + 300, OK: true}},
		{"same owner may shorten", st(nil, map[string]LeaseRow{"l": held}), Input{Kind: Lease, Key: "l", Owner: "o1", TTLMillis: 10},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3, ExpiresAt: now + 10}}), Output{Token: 3, ExpiresAt: now + 10, OK: true}},
		{"other owner while live is held", st(nil, map[string]LeaseRow{"l": held}), Input{Kind: Lease, Key: "l", Owner: "o2", TTLMillis: 100},
			st(nil, map[string]LeaseRow{"l": held}), Output{Err: ErrLeaseHeld, Owner: "o1", ExpiresAt: now + 100}},
		{"other owner at the deadline gets next token", st(nil, map[string]LeaseRow{"l": held}), Input{Kind: Lease, Key: "l", Owner: "o2", TTLMillis: 100, NowMillis: now + 100},
			st(nil, map[string]LeaseRow{"l": {Owner: "o2", Token: 4, ExpiresAt: now + 200}}), Output{Token: 4, ExpiresAt: now + 200}},
		{"same owner after expiry gets next token", st(nil, map[string]LeaseRow{"l": held}), Input{Kind: Lease, Key: "l", Owner: "o1", TTLMillis: 100, NowMillis: now + 101},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 4, ExpiresAt: now + 201}}), Output{Token: 4, ExpiresAt: now + 201}},
		{"after release: next token", st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3}}), Input{Kind: Lease, Key: "l", Owner: "o1", TTLMillis: 100},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 4, ExpiresAt: now + 100}}), Output{Token: 4, ExpiresAt: now + 100}},
		{"key namespace is separate", st(map[string]Entry{"l": i7}, nil), Input{Kind: Lease, Key: "l", Owner: "o1", TTLMillis: 100},
			st(map[string]Entry{"l": i7}, map[string]LeaseRow{"l": {Owner: "o1", Token: 1, ExpiresAt: now + 100}}), Output{Token: 1, ExpiresAt: now + 100}},
		{"zero ttl refused", NewState(), Input{Kind: Lease, Key: "l", Owner: "o1"}, NewState(), Output{Err: ErrInvalid}},
		{"empty owner refused", NewState(), Input{Kind: Lease, Key: "l", TTLMillis: 100}, NewState(), Output{Err: ErrInvalid}},
		{"empty name refused", NewState(), Input{Kind: Lease, Owner: "o1", TTLMillis: 100}, NewState(), Output{Err: ErrInvalid}},
	})
}

func TestRenew(t *testing.T) {
	held := LeaseRow{Owner: "o1", Token: 3, ExpiresAt: now + 100}
	leases := map[string]LeaseRow{"l": held}
	runSteps(t, []stepCase{
		{"holder renews", st(nil, leases), Input{Kind: Renew, Key: "l", Owner: "o1", Token: 3, TTLMillis: 500},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3, ExpiresAt: now + 500}}), Output{ExpiresAt: now + 500}},
		{"wrong token", st(nil, leases), Input{Kind: Renew, Key: "l", Owner: "o1", Token: 2, TTLMillis: 500}, st(nil, leases), Output{Err: ErrLeaseLost}},
		{"wrong owner", st(nil, leases), Input{Kind: Renew, Key: "l", Owner: "o2", Token: 3, TTLMillis: 500}, st(nil, leases), Output{Err: ErrLeaseLost}},
		{"expired at the deadline", st(nil, leases), Input{Kind: Renew, Key: "l", Owner: "o1", Token: 3, TTLMillis: 500, NowMillis: now + 100},
			st(nil, leases), Output{Err: ErrLeaseLost}},
		{"released", st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3}}), Input{Kind: Renew, Key: "l", Owner: "o1", Token: 3, TTLMillis: 500},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3}}), Output{Err: ErrLeaseLost}},
		{"never granted", NewState(), Input{Kind: Renew, Key: "l", Owner: "o1", Token: 1, TTLMillis: 500}, NewState(), Output{Err: ErrLeaseLost}},
		{"zero ttl refused", st(nil, leases), Input{Kind: Renew, Key: "l", Owner: "o1", Token: 3}, st(nil, leases), Output{Err: ErrInvalid}},
	})
}

func TestRelease(t *testing.T) {
	held := LeaseRow{Owner: "o1", Token: 3, ExpiresAt: now + 100}
	leases := map[string]LeaseRow{"l": held}
	runSteps(t, []stepCase{
		{"holder releases, token kept", st(nil, leases), Input{Kind: Release, Key: "l", Owner: "o1", Token: 3},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3}}), Output{}},
		{"wrong token", st(nil, leases), Input{Kind: Release, Key: "l", Owner: "o1", Token: 4}, st(nil, leases), Output{Err: ErrLeaseLost}},
		{"wrong owner", st(nil, leases), Input{Kind: Release, Key: "l", Owner: "o2", Token: 3}, st(nil, leases), Output{Err: ErrLeaseLost}},
		{"expired", st(nil, leases), Input{Kind: Release, Key: "l", Owner: "o1", Token: 3, NowMillis: now + 100}, st(nil, leases), Output{Err: ErrLeaseLost}},
		{"twice", st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3}}), Input{Kind: Release, Key: "l", Owner: "o1", Token: 3},
			st(nil, map[string]LeaseRow{"l": {Owner: "o1", Token: 3}}), Output{Err: ErrLeaseLost}},
	})
}

func TestLeaseTokenAfterReleaseSequence(t *testing.T) {
	s := NewState()
	var out Output
	s, out = Step(s, Input{Kind: Lease, Key: "l", Owner: "a", TTLMillis: 100, NowMillis: now})
	require.Equal(t, int64(1), out.Token)
	s, out = Step(s, Input{Kind: Release, Key: "l", Owner: "a", Token: 1, NowMillis: now + 1})
	require.Equal(t, ErrNone, out.Err)
	s, out = Step(s, Input{Kind: Lease, Key: "l", Owner: "a", TTLMillis: 100, NowMillis: now + 2})
	assert.Equal(t, int64(2), out.Token, "a grant after a release by the same owner is a new grant")
	s, out = Step(s, Input{Kind: Renew, Key: "l", Owner: "a", Token: 1, TTLMillis: 100, NowMillis: now + 3})
	assert.Equal(t, ErrLeaseLost, out.Err, "the old token is fenced off")
	_, out = Step(s, Input{Kind: Lease, Key: "l", Owner: "b", TTLMillis: 100, NowMillis: now + 102})
	assert.Equal(t, int64(3), out.Token)
}

func TestSweep(t *testing.T) {
	runSteps(t, []stepCase{
		{"deletes expired only, never leases",
			st(map[string]Entry{"a": dead, "b": i7exp, "c": i7, "d": {Value: Bytes("x"), ExpiresAt: 5}},
				map[string]LeaseRow{"l": {Owner: "o", Token: 1, ExpiresAt: 5}}),
			Input{Kind: Sweep},
			st(map[string]Entry{"b": i7exp, "c": i7}, map[string]LeaseRow{"l": {Owner: "o", Token: 1, ExpiresAt: 5}}), Output{N: 2}},
		{"nothing expired", st(map[string]Entry{"b": i7exp}, nil), Input{Kind: Sweep}, st(map[string]Entry{"b": i7exp}, nil), Output{}},
		{"one ms before the deadline keeps it", st(map[string]Entry{"b": i7exp}, nil), Input{Kind: Sweep, NowMillis: now + 499},
			st(map[string]Entry{"b": i7exp}, nil), Output{}},
	})
}

func TestUpdate(t *testing.T) {
	base := st(map[string]Entry{"a": i7, "s": b7}, map[string]LeaseRow{"l": {Owner: "o1", Token: 2, ExpiresAt: now + 100}})
	runSteps(t, []stepCase{
		{"all apply in order at the update's now", base,
			Input{Kind: Update, Ops: []Input{
				{Kind: IncrBy, Key: "a", Delta: 1},
				{Kind: Get, Key: "a", NowMillis: 1}, // a sub-input's own now is ignored
				{Kind: Get, Key: "zz"},              // not found does not abort
				{Kind: Set, Key: "b", Value: Int(1), TTLMillis: 10},
				{Kind: Del, Keys: []string{"s"}},
			}},
			st(map[string]Entry{"a": {Value: Int(8)}, "b": {Value: Int(1), ExpiresAt: now + 10}},
				map[string]LeaseRow{"l": {Owner: "o1", Token: 2, ExpiresAt: now + 100}}),
			Output{Sub: []Output{{Int: 8}, {Value: Int(8)}, {Err: ErrNotFound}, {}, {N: 1}}}},
		{"not integer aborts everything", base,
			Input{Kind: Update, Ops: []Input{
				{Kind: Set, Key: "b", Value: Int(1)},
				{Kind: IncrBy, Key: "s", Delta: 1},
				{Kind: Set, Key: "c", Value: Int(1)},
			}},
			base, Output{Err: ErrNotInteger, Sub: []Output{{}, {Err: ErrNotInteger}}}},
		{"lease held aborts", base,
			Input{Kind: Update, Ops: []Input{
				{Kind: IncrBy, Key: "a", Delta: 1},
				{Kind: Lease, Key: "l", Owner: "o2", TTLMillis: 10},
			}},
			base, Output{Err: ErrLeaseHeld, Sub: []Output{{Int: 8}, {Err: ErrLeaseHeld, Owner: "o1", ExpiresAt: now + 100}}}},
		{"lease granted inside", base,
			Input{Kind: Update, Ops: []Input{
				{Kind: Lease, Key: "m", Owner: "o2", TTLMillis: 10},
				{Kind: Set, Key: "fenced", Value: Int(1)},
			}},
			st(map[string]Entry{"a": i7, "s": b7, "fenced": {Value: Int(1)}},
				map[string]LeaseRow{"l": {Owner: "o1", Token: 2, ExpiresAt: now + 100}, "m": {Owner: "o2", Token: 1, ExpiresAt: now + 10}}),
			Output{Sub: []Output{{Token: 1, ExpiresAt: now + 10}, {}}}},
		{"callback abort rolls back", base,
			Input{Kind: Update, Abort: true, Ops: []Input{{Kind: Del, Keys: []string{"a"}}, {Kind: Get, Key: "a"}}},
			base, Output{Err: ErrAborted, Sub: []Output{{N: 1}, {Err: ErrNotFound}}}},
		{"empty update", base, Input{Kind: Update}, base, Output{Sub: []Output{}}},
		{"nested update refused", base, Input{Kind: Update, Ops: []Input{{Kind: Update}}}, base, Output{Err: ErrInvalid}},
		{"sweep inside refused", base, Input{Kind: Update, Ops: []Input{{Kind: Sweep}}}, base, Output{Err: ErrInvalid}},
		{"invalid sub-input aborts", base, Input{Kind: Update, Ops: []Input{{Kind: Set, Key: "b", Value: Int(1)}, {Kind: Get}}},
			base, Output{Err: ErrInvalid, Sub: []Output{{}, {Err: ErrInvalid}}}},
	})
}

func TestFlush(t *testing.T) {
	base := st(map[string]Entry{"a": i7exp, "s": b7, "m": {Value: Int(math.MaxInt64)}}, nil)
	runSteps(t, []stepCase{
		{"each delta on its own", base,
			Input{Kind: Flush, Ops: []Input{
				{Kind: IncrBy, Key: "a", Delta: 2},
				{Kind: IncrBy, Key: "s", Delta: 1},
				{Kind: IncrBy, Key: "m", Delta: 1},
				{Kind: IncrBy, Key: "n", Delta: 4},
			}},
			st(map[string]Entry{"a": {Value: Int(9), ExpiresAt: now + 500}, "s": b7, "m": {Value: Int(math.MaxInt64)}, "n": {Value: Int(4)}}, nil),
			Output{Sub: []Output{{Int: 9}, {Err: ErrNotInteger}, {Err: ErrOverflow}, {Int: 4}}}},
		{"only increments", base, Input{Kind: Flush, Ops: []Input{{Kind: Set, Key: "a", Value: Int(1)}}}, base, Output{Err: ErrInvalid}},
	})
}

func TestInvalidKind(t *testing.T) {
	s := st(map[string]Entry{"a": i7}, nil)
	got, out := Step(s, Input{Kind: 0, Key: "a", NowMillis: now})
	assert.Equal(t, ErrInvalid, out.Err)
	assert.True(t, Equal(s, got))
	_, out = Step(s, Input{Kind: kindEnd, Key: "a", NowMillis: now})
	assert.Equal(t, ErrInvalid, out.Err)
}
