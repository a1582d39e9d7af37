package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMatches(t *testing.T) {
	cases := []struct {
		name      string
		in        Input
		want, got Output
		match     bool
	}{
		{"get same", Input{Kind: Get}, Output{Value: Int(7)}, Output{Value: Int(7)}, true},
		{"get type differs", Input{Kind: Get}, Output{Value: Int(7)}, Output{Value: Bytes("7")}, false},
		{"get not found", Input{Kind: Get}, Output{Err: ErrNotFound}, Output{Err: ErrNotFound}, true},
		{"get err differs", Input{Kind: Get}, Output{Err: ErrNotFound}, Output{}, false},
		{"set ignores stray fields", Input{Kind: Set}, Output{}, Output{Int: 4, OK: true}, true},
		{"incr value", Input{Kind: IncrBy}, Output{Int: 5}, Output{Int: 6}, false},
		{"cas ok", Input{Kind: CAS}, Output{OK: true}, Output{}, false},
		{"del n", Input{Kind: Del}, Output{N: 1}, Output{N: 2}, false},
		{"ttl", Input{Kind: TTL}, Output{TTLMillis: 5}, Output{TTLMillis: 5}, true},
		{"ttl differs", Input{Kind: TTL}, Output{TTLMillis: NoExpiry}, Output{TTLMillis: 5}, false},
		{"lease token", Input{Kind: Lease}, Output{Token: 2, ExpiresAt: 9}, Output{Token: 1, ExpiresAt: 9}, false},
		{"lease deadline", Input{Kind: Lease}, Output{Token: 2, ExpiresAt: 9}, Output{Token: 2, ExpiresAt: 8}, false},
		{"lease extended differs from a new grant", Input{Kind: Lease}, Output{Token: 2, ExpiresAt: 9, OK: true}, Output{Token: 2, ExpiresAt: 9}, false},
		{"lease ok, owner ignored", Input{Kind: Lease}, Output{Token: 2, ExpiresAt: 9}, Output{Token: 2, ExpiresAt: 9, Owner: "me"}, true},
		{"held, holder unseen", Input{Kind: Lease}, Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 9}, Output{Err: ErrLeaseHeld}, true},
		{"held, holder seen", Input{Kind: Lease}, Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 9}, Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 9}, true},
		{"held, wrong holder", Input{Kind: Lease}, Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 9}, Output{Err: ErrLeaseHeld, Owner: "p", ExpiresAt: 9}, false},
		{"renew", Input{Kind: Renew}, Output{ExpiresAt: 9}, Output{ExpiresAt: 10}, false},
		{"update subs", Input{Kind: Update, Ops: []Input{{Kind: Get}, {Kind: IncrBy}}},
			Output{Sub: []Output{{Value: Int(1)}, {Int: 2}}}, Output{Sub: []Output{{Value: Int(1)}, {Int: 2}}}, true},
		{"update sub differs", Input{Kind: Update, Ops: []Input{{Kind: Get}, {Kind: IncrBy}}},
			Output{Sub: []Output{{Value: Int(1)}, {Int: 2}}}, Output{Sub: []Output{{Value: Int(1)}, {Int: 3}}}, false},
		{"update sub count differs", Input{Kind: Update, Ops: []Input{{Kind: Get}, {Kind: IncrBy}}},
			Output{Err: ErrNotInteger, Sub: []Output{{Value: Int(1)}, {Err: ErrNotInteger}}}, Output{Err: ErrNotInteger, Sub: []Output{{Value: Int(1)}}}, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.match, Matches(c.in, c.want, c.got), c.name)
	}
}

func TestDescribe(t *testing.T) {
	cases := []struct {
		in   Input
		out  Output
		want string
	}{
		{Input{Kind: IncrBy, Key: "a", Delta: 1, NowMillis: 1000}, Output{Int: 6}, `incrby("a", +1) @1000 -> 6`},
		{Input{Kind: Get, Key: "a", NowMillis: 5}, Output{Err: ErrNotFound}, `get("a") @5 -> not_found`},
		{Input{Kind: Set, Key: "a", Value: Bytes("x"), TTLMillis: 10, NowMillis: 5}, Output{}, `set("a", "x", ttl=10ms) @5 -> ok`},
		{Input{Kind: CAS, Key: "a", New: Ptr(Int(1)), NowMillis: 5}, Output{OK: true}, `cas("a", nil -> 1) @5 -> true`},
		{Input{Kind: Del, Keys: []string{"a", "b"}, NowMillis: 5}, Output{N: 1}, `del("a", "b") @5 -> n=1`},
		{Input{Kind: TTL, Key: "a", NowMillis: 5}, Output{TTLMillis: NoExpiry}, `ttl("a") @5 -> no expiry`},
		{Input{Kind: Lease, Key: "l", Owner: "o", TTLMillis: 10, NowMillis: 5}, Output{Token: 3, ExpiresAt: 15}, `lease("l", "o", 10ms) @5 -> #3 until 15`},
		{Input{Kind: Lease, Key: "l", Owner: "o", TTLMillis: 10, NowMillis: 5}, Output{Token: 3, ExpiresAt: 15, OK: true}, `lease("l", "o", 10ms) @5 -> #3 until 15, extended`},
		{Input{Kind: Lease, Key: "l", Owner: "p", TTLMillis: 10, NowMillis: 5}, Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 15},
			`lease("l", "p", 10ms) @5 -> lease_held by "o" until 15`},
		{Input{Kind: Update, NowMillis: 5, Ops: []Input{{Kind: IncrBy, Key: "a", Delta: -2}, {Kind: Get, Key: "b"}}},
			Output{Err: ErrNone, Sub: []Output{{Int: 4}, {Err: ErrNotFound}}}, `update[incrby("a", -2); get("b")] @5 -> none [4; not_found]`},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Describe(c.in, c.out))
	}
	assert.Equal(t, `{err=lease_held expires=15 owner="o"}`, Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 15}.String())
	assert.Equal(t, "kind(99)", Kind(99).String())
}
