package ratelimit

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// TestU128MatchesBigIntegers: the sliding window's 128-bit arithmetic (a
// count times a window in nanoseconds overflows 64 bits for a large limit
// over a long window) agrees with math/big on every operation the window
// uses, the carry between the halves, the comparison of numbers whose
// halves disagree, and the saturation of a quotient past 64 bits included.
// Operands are drawn whole and from around the edges (0, 1, powers of two,
// the largest), where a wrong carry or comparison shows.
func TestU128MatchesBigIntegers(t *testing.T) {
	edgy := rapid.OneOf(
		rapid.Uint64(),
		rapid.SampledFrom([]uint64{0, 1, 2, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64}),
		rapid.Custom(func(t *rapid.T) uint64 { return 1 << rapid.IntRange(0, 63).Draw(t, "shift") }),
	)
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	maxU64 := new(big.Int).SetUint64(math.MaxUint64)
	asBig := func(x u128) *big.Int {
		b := new(big.Int).SetUint64(x.hi)
		return b.Mul(b, two64).Add(b, new(big.Int).SetUint64(x.lo))
	}
	bigMul := func(a, b uint64) *big.Int {
		return new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
	}
	rapid.Check(t, func(t *rapid.T) {
		a, b := edgy.Draw(t, "a"), edgy.Draw(t, "b")
		c, d := edgy.Draw(t, "c"), edgy.Draw(t, "d")
		x, y := mul(a, b), mul(c, d)
		bx, by := bigMul(a, b), bigMul(c, d)
		if got := asBig(x); got.Cmp(bx) != 0 {
			t.Fatalf("mul(%d, %d) = %v, want %v", a, b, got, bx)
		}
		// The window adds products of a count and a window, each under
		// 2^126 (both factors under 2^63): add is exact there.
		if bx.BitLen() < 127 && by.BitLen() < 127 {
			want := new(big.Int).Add(bx, by)
			if got := asBig(x.add(y)); got.Cmp(want) != 0 {
				t.Fatalf("%v + %v = %v, want %v", bx, by, got, want)
			}
		}
		if got, want := x.greater(y), bx.Cmp(by) > 0; got != want {
			t.Fatalf("%v > %v: %v, want %v", bx, by, got, want)
		}
		// A quotient is asked of any 128-bit number, drawn by its halves
		// too, and of the largest one whose quotient fits 64 bits, which
		// leaves a remainder: rounded up, it saturates.
		div := edgy.Filter(func(v uint64) bool { return v != 0 }).Draw(t, "divisor")
		for _, z := range []u128{x, {edgy.Draw(t, "hi"), edgy.Draw(t, "lo")}, {div - 1, math.MaxUint64}} {
			bz := asBig(z)
			q, r := new(big.Int).QuoRem(bz, new(big.Int).SetUint64(div), new(big.Int))
			floor := q
			if floor.Cmp(maxU64) > 0 {
				floor = maxU64
			}
			if got := z.floorDiv(div); got != floor.Uint64() {
				t.Fatalf("floor(%v / %d) = %d, want %v", bz, div, got, floor)
			}
			ceil := new(big.Int).Set(q)
			if r.Sign() != 0 {
				ceil.Add(ceil, big.NewInt(1))
			}
			if ceil.Cmp(maxU64) > 0 {
				ceil = maxU64
			}
			if got := z.ceilDiv(div); got != ceil.Uint64() {
				t.Fatalf("ceil(%v / %d) = %d, want %v", bz, div, got, ceil)
			}
		}
	})
}
