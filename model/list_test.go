package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestScan(t *testing.T) {
	kv := map[string]Entry{"a": i7, "ab": dead, "abc": i7exp, "b": b7, "\xff": i7}
	s := st(kv, map[string]LeaseRow{"a": {Owner: "o", Token: 1, ExpiresAt: now + 10}})
	runSteps(t, []stepCase{
		{"every live key in byte order", s, Input{Kind: Scan}, s,
			Output{Rows: []KeyRow{{"a", i7}, {"abc", i7exp}, {"b", b7}, {"\xff", i7}}}},
		{"with all, the expired row too", s, Input{Kind: Scan, All: true}, s,
			Output{Rows: []KeyRow{{"a", i7}, {"ab", dead}, {"abc", i7exp}, {"b", b7}, {"\xff", i7}}}},
		{"a prefix, itself included", s, Input{Kind: Scan, Key: "ab", All: true}, s,
			Output{Rows: []KeyRow{{"ab", dead}, {"abc", i7exp}}}},
		{"a prefix nothing has", s, Input{Kind: Scan, Key: "c"}, s, Output{}},
		{"one ms before the deadline is live", s, Input{Kind: Scan, Key: "abc", NowMillis: now + 499}, s,
			Output{Rows: []KeyRow{{"abc", i7exp}}}},
		{"at the deadline it is not", s, Input{Kind: Scan, Key: "abc", NowMillis: now + 500}, s, Output{}},
		{"empty", NewState(), Input{Kind: Scan, All: true}, NewState(), Output{}},
	})
}

func TestLeases(t *testing.T) {
	held := LeaseRow{Owner: "o1", Token: 3, ExpiresAt: now + 10}
	expired := LeaseRow{Owner: "o2", Token: 2, ExpiresAt: now}
	released := LeaseRow{Owner: "o3", Token: 5}
	s := st(map[string]Entry{"k": i7}, map[string]LeaseRow{"m": expired, "l": held, "n": released})
	runSteps(t, []stepCase{
		{"held only", s, Input{Kind: Leases}, s, Output{Leases: []NamedLease{{"l", held}}}},
		{"with all, every row by name", s, Input{Kind: Leases, All: true}, s,
			Output{Leases: []NamedLease{{"l", held}, {"m", expired}, {"n", released}}}},
		{"a prefix", s, Input{Kind: Leases, Key: "m", All: true}, s, Output{Leases: []NamedLease{{"m", expired}}}},
		{"none", st(map[string]Entry{"k": i7}, nil), Input{Kind: Leases, All: true}, st(map[string]Entry{"k": i7}, nil), Output{}},
	})
}

func TestListsAreRefusedInAnUpdate(t *testing.T) {
	for _, k := range []Kind{Scan, Leases} {
		assert.False(t, Refuses(Input{Kind: k}), "%s alone", k)
		assert.True(t, Refuses(Input{Kind: Update, Ops: []Input{{Kind: k}}}), "%s in an update", k)
	}
}

// A Scan of every key lists a key exactly when Get finds it, with Get's
// value; Leases lists a lease exactly when it is held. The lists and the
// one-key reads are two readings of one state, and must agree.
func TestListsAgreeWithReads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := NewState()
		nowMillis := int64(1000)
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			nowMillis += rapid.Int64Range(0, 8).Draw(t, "advance")
			s, _ = Step(s, genSmallInput(t, nowMillis, 0))
		}
		_, keys := Step(s, Input{Kind: Scan, NowMillis: nowMillis})
		listed := map[string]Value{}
		for _, r := range keys.Rows {
			listed[r.Key] = r.Value
		}
		for k := range s.KV {
			_, got := Step(s, Input{Kind: Get, Key: k, NowMillis: nowMillis})
			v, ok := listed[k]
			require.Equal(t, got.Err == ErrNone, ok, "key %q: get %s, listed %v", k, got, ok)
			if ok {
				require.Equal(t, got.Value, v, "key %q", k)
			}
		}
		require.LessOrEqual(t, len(listed), len(s.KV))
		_, leases := Step(s, Input{Kind: Leases, NowMillis: nowMillis})
		held := 0
		for _, l := range s.Leases {
			if l.Live(nowMillis) {
				held++
			}
		}
		require.Len(t, leases.Leases, held)
	})
}

func TestListMatchesAndDescribe(t *testing.T) {
	rows := Output{Rows: []KeyRow{{"a", i7exp}, {"b", b7}}}
	assert.True(t, Matches(Input{Kind: Scan}, rows, Output{Rows: []KeyRow{{"a", i7exp}, {"b", b7}}}))
	assert.False(t, Matches(Input{Kind: Scan}, rows, Output{Rows: []KeyRow{{"b", b7}, {"a", i7exp}}}), "order")
	assert.False(t, Matches(Input{Kind: Scan}, rows, Output{Rows: []KeyRow{{"a", i7}, {"b", b7}}}), "deadline")
	assert.False(t, Matches(Input{Kind: Scan}, rows, Output{Rows: []KeyRow{{"a", i7exp}}}), "a row missing")
	assert.True(t, Matches(Input{Kind: Scan}, Output{}, Output{Rows: []KeyRow{}}), "nil and empty")
	held := Output{Leases: []NamedLease{{"l", LeaseRow{Owner: "o", Token: 2, ExpiresAt: 9}}}}
	assert.False(t, Matches(Input{Kind: Leases}, held, Output{Leases: []NamedLease{{"l", LeaseRow{Owner: "o", Token: 1, ExpiresAt: 9}}}}), "token")

	assert.Equal(t, `scan("a", all) @5 -> ["a"=7 exp@1000500, "b"="7"]`, Describe(Input{Kind: Scan, Key: "a", All: true, NowMillis: 5}, rows))
	assert.Equal(t, `leases() @5 -> ["l"=owner "o" #2 exp@9]`, Describe(Input{Kind: Leases, NowMillis: 5}, held))
	assert.Equal(t, `scan("") @5 -> []`, Describe(Input{Kind: Scan, NowMillis: 5}, Output{}))
	assert.Equal(t, `leases("e1/", all) @5 -> []`, Describe(Input{Kind: Leases, Key: "e1/", All: true, NowMillis: 5}, Output{}))
}

func TestListJSONRoundTrip(t *testing.T) {
	out := Output{
		Rows:   []KeyRow{{"a", i7exp}, {"\xff\x00", b7}},
		Leases: []NamedLease{{"l", LeaseRow{Owner: "\xfe", Token: 2}}},
	}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	var back Output
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, out.Equal(back), "%s != %s", out, back)
	b, err = json.Marshal(Input{Kind: Scan, Key: "p", All: true, NowMillis: 5})
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"scan","key":"p","all":true,"now_ms":5}`, string(b))
}
