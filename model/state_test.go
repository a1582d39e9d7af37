package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEqualHashString(t *testing.T) {
	a := st(map[string]Entry{"a": i7, "b": {Value: Bytes("x"), ExpiresAt: 9}}, map[string]LeaseRow{"l": {Owner: "o", Token: 2, ExpiresAt: 5}})
	b := st(map[string]Entry{"b": {Value: Bytes("x"), ExpiresAt: 9}, "a": i7}, map[string]LeaseRow{"l": {Owner: "o", Token: 2, ExpiresAt: 5}})
	assert.True(t, Equal(a, b))
	assert.Equal(t, a.Hash(), b.Hash())
	assert.Equal(t, a.String(), b.String())
	assert.Equal(t, `{kv: "a"=7, "b"="x" exp@9; leases: "l"=owner "o" #2 exp@5}`, a.String())

	assert.True(t, Equal(State{}, NewState()), "nil maps equal empty maps")
	assert.Equal(t, State{}.Hash(), NewState().Hash())

	differ := []State{
		st(map[string]Entry{"a": b7, "b": {Value: Bytes("x"), ExpiresAt: 9}}, a.Leases),  // int 7 vs "7"
		st(map[string]Entry{"a": i7, "b": {Value: Bytes("x"), ExpiresAt: 10}}, a.Leases), // deadline
		st(map[string]Entry{"a": i7}, a.Leases),                                          // missing key
		st(a.KV, map[string]LeaseRow{"l": {Owner: "o", Token: 3, ExpiresAt: 5}}),         // token
		st(a.KV, nil), // no lease
		st(map[string]Entry{"a": i7, "b": {Value: Bytes("x"), ExpiresAt: 9}, "l": i7}, nil),                                                   // key, not lease
		st(map[string]Entry{"a": i7, "b": {Value: Bytes("x"), ExpiresAt: 9}}, map[string]LeaseRow{"l": {Owner: "p", Token: 2, ExpiresAt: 5}}), // owner
	}
	for i, d := range differ {
		assert.False(t, Equal(a, d), "case %d", i)
		assert.NotEqual(t, a.Hash(), d.Hash(), "case %d", i)
		assert.NotEqual(t, a.String(), d.String(), "case %d", i)
	}
	// Length prefixes keep concatenations apart.
	x := st(map[string]Entry{"ab": {Value: Bytes("c")}}, nil)
	y := st(map[string]Entry{"a": {Value: Bytes("bc")}}, nil)
	assert.NotEqual(t, x.Hash(), y.Hash())
}

func TestCloneIsDeep(t *testing.T) {
	a := st(map[string]Entry{"a": i7}, map[string]LeaseRow{"l": {Owner: "o", Token: 1}})
	c := a.Clone()
	c.KV["a"] = b7
	c.Leases["l"] = LeaseRow{Owner: "p", Token: 2}
	assert.Equal(t, i7, a.KV["a"])
	assert.Equal(t, LeaseRow{Owner: "o", Token: 1}, a.Leases["l"])
	assert.NotNil(t, State{}.Clone().KV)
}

func TestLive(t *testing.T) {
	assert.True(t, Entry{}.Live(now))
	assert.True(t, Entry{ExpiresAt: now + 1}.Live(now))
	assert.False(t, Entry{ExpiresAt: now}.Live(now))
	assert.False(t, LeaseRow{}.Live(now), "released")
	assert.True(t, LeaseRow{ExpiresAt: now + 1}.Live(now))
	assert.False(t, LeaseRow{ExpiresAt: now}.Live(now))
}
