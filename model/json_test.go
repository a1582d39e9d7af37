package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestJSONReadable(t *testing.T) {
	b, err := json.Marshal(Input{Kind: CAS, Key: "a", Expected: Ptr(Int(7)), New: Ptr(Bytes("x")), NowMillis: 5})
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"cas","key":"a","expected":{"int":7},"new":{"bytes":"x"},"now_ms":5}`, string(b))
	b, err = json.Marshal(Output{Err: ErrLeaseHeld, Owner: "o", ExpiresAt: 9})
	require.NoError(t, err)
	assert.JSONEq(t, `{"err":"lease_held","owner":"o","expires_at":9}`, string(b))
	b, err = json.Marshal(Bytes("\xff\x00"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"bytes":{"base64":"/wA="}}`, string(b))
}

func TestJSONRejectsUnknownNames(t *testing.T) {
	var in Input
	assert.Error(t, json.Unmarshal([]byte(`{"kind":"frobnicate"}`), &in))
	var out Output
	assert.Error(t, json.Unmarshal([]byte(`{"err":"oops"}`), &out))
	var v Value
	assert.Error(t, json.Unmarshal([]byte(`{"int":1,"bytes":"x"}`), &v))
	_, err := json.Marshal(Input{Kind: kindEnd})
	assert.Error(t, err)
}

func genValue(t *rapid.T, label string) Value {
	if rapid.Bool().Draw(t, label+"IsInt") {
		return Int(rapid.Int64().Draw(t, label+"Int"))
	}
	return Bytes(rapid.String().Draw(t, label+"Bytes") + string(rapid.SliceOf(rapid.Byte()).Draw(t, label+"Raw")))
}

func genInput(t *rapid.T, depth int) Input {
	in := Input{
		Kind:      rapid.SampledFrom([]Kind{Get, Set, Del, IncrBy, CAS, Expire, TTL, Lease, Renew, Release, Sweep, Update, Flush, Scan, Leases}).Draw(t, "kind"),
		Key:       string(rapid.SliceOf(rapid.Byte()).Draw(t, "key")),
		Value:     genValue(t, "value"),
		Delta:     rapid.Int64().Draw(t, "delta"),
		TTLMillis: rapid.Int64().Draw(t, "ttl"),
		Token:     rapid.Int64().Draw(t, "token"),
		Owner:     rapid.String().Draw(t, "owner"),
		NowMillis: rapid.Int64().Draw(t, "now"),
		Abort:     rapid.Bool().Draw(t, "abort"),
		All:       rapid.Bool().Draw(t, "all"),
	}
	for _, k := range rapid.SliceOf(rapid.SliceOf(rapid.Byte())).Draw(t, "keys") {
		in.Keys = append(in.Keys, string(k))
	}
	if rapid.Bool().Draw(t, "hasExpected") {
		in.Expected = Ptr(genValue(t, "expected"))
	}
	if rapid.Bool().Draw(t, "hasNew") {
		in.New = Ptr(genValue(t, "new"))
	}
	if depth > 0 {
		n := rapid.IntRange(0, 3).Draw(t, "ops")
		for range n {
			in.Ops = append(in.Ops, genInput(t, depth-1))
		}
	}
	return in
}

func TestJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t, 1)
		b, err := json.Marshal(in)
		require.NoError(t, err)
		var back Input
		require.NoError(t, json.Unmarshal(b, &back))
		// Keys: nil and empty both come back nil.
		if len(in.Keys) == 0 {
			in.Keys = nil
		}
		for i := range in.Ops {
			if len(in.Ops[i].Keys) == 0 {
				in.Ops[i].Keys = nil
			}
		}
		assert.Equal(t, in, back)

		s, out := Step(NewState(), in)
		_ = s
		b, err = json.Marshal(out)
		require.NoError(t, err)
		var outBack Output
		require.NoError(t, json.Unmarshal(b, &outBack))
		assert.True(t, out.Equal(outBack), "%s != %s", out, outBack)
	})
}
