package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBadInputIsRefused: every input the engine refuses as bad (README,
// "Errors": a key or lease name empty, over 1 KiB, not UTF-8 or holding NUL;
// a value over 1 MiB; an empty owner or one over 1 KiB) answers ErrInvalid
// and changes nothing, in a state where the same call with good input would
// write; input at the limits is accepted.
func TestBadInputIsRefused(t *testing.T) {
	atLimit := strings.Repeat("k", maxKeyBytes)
	bad := map[string]string{
		"empty":        "",
		"over 1 KiB":   atLimit + "k",
		"invalid utf8": "\xff\xfe",
		"nul byte":     "a\x00b",
	}
	tooBig := Bytes(strings.Repeat("v", maxValueBytes+1))
	held := LeaseRow{Owner: "o", Token: 1, ExpiresAt: now + 100}
	s := st(map[string]Entry{"a": i7}, map[string]LeaseRow{"l": held})
	refused := func(t *testing.T, in Input) {
		t.Helper()
		in.NowMillis = now
		got, out := Step(s, in)
		assert.Equal(t, ErrInvalid, out.Err, "%.80s", in)
		assert.True(t, Equal(s, got), "%.80s changed the state", in)
		assert.True(t, Refuses(in), "%.80s", in)
	}
	for name, k := range bad {
		t.Run("key "+name, func(t *testing.T) {
			for _, in := range []Input{
				{Kind: Get, Key: k},
				{Kind: TTL, Key: k},
				{Kind: Set, Key: k, Value: Int(1)},
				{Kind: Del, Keys: []string{"a", k}},
				{Kind: IncrBy, Key: k, Delta: 1},
				{Kind: CAS, Key: k, New: Ptr(Int(1))},
				{Kind: Expire, Key: k, TTLMillis: 10},
				{Kind: Expire, Key: k},
				{Kind: Lease, Key: k, Owner: "o2", TTLMillis: 10},
				{Kind: Renew, Key: k, Owner: "o", Token: 1, TTLMillis: 10},
				{Kind: Release, Key: k, Owner: "o", Token: 1},
			} {
				refused(t, in)
				// Inside an Update the bad verb aborts the whole of it.
				u := Input{Kind: Update, NowMillis: now, Ops: []Input{{Kind: Set, Key: "b", Value: Int(1)}, in}}
				got, out := Step(s, u)
				assert.Equal(t, ErrInvalid, out.Err, "update of %.80s", in)
				assert.True(t, Equal(s, got), "update of %.80s changed the state", in)
			}
		})
	}
	t.Run("owner", func(t *testing.T) {
		for _, o := range []string{"", strings.Repeat("o", maxKeyBytes+1)} {
			refused(t, Input{Kind: Lease, Key: "m", Owner: o, TTLMillis: 10})
			refused(t, Input{Kind: Renew, Key: "l", Owner: o, Token: 1, TTLMillis: 10})
			refused(t, Input{Kind: Release, Key: "l", Owner: o, Token: 1})
		}
	})
	t.Run("value over 1 MiB", func(t *testing.T) {
		refused(t, Input{Kind: Set, Key: "b", Value: tooBig})
		refused(t, Input{Kind: CAS, Key: "b", New: Ptr(tooBig)})
		refused(t, Input{Kind: CAS, Key: "a", Expected: Ptr(tooBig), New: Ptr(Int(1))})
		refused(t, Input{Kind: CAS, Key: "a", Expected: Ptr(tooBig)})
	})
	t.Run("at the limits", func(t *testing.T) {
		full := Bytes(strings.Repeat("v", maxValueBytes))
		owner := strings.Repeat("o", maxKeyBytes) + "\x00\xff" // an owner may hold any bytes
		owner = owner[len(owner)-maxKeyBytes:]
		for _, in := range []Input{
			{Kind: Set, Key: atLimit, Value: full},
			{Kind: CAS, Key: "b", New: Ptr(full)},
			{Kind: Lease, Key: atLimit, Owner: owner, TTLMillis: 10},
			{Kind: Set, Key: "ключ🔑", Value: Int(1)},
		} {
			in.NowMillis = now
			got, out := Step(s, in)
			assert.Equal(t, ErrNone, out.Err, "%.80s", in)
			assert.False(t, Equal(s, got), "%.80s wrote nothing", in)
		}
	})
}
