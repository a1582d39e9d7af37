package model

import "strconv"

// Value is a stored value: an integer (IsInt, Int) or bytes (Bytes). Values
// are comparable with ==, and equal only when type and content are equal:
// Int(7) != Bytes("7"). The zero Value is the empty bytes value.
type Value struct {
	IsInt bool
	Int   int64
	Bytes string
}

// Int returns the integer Value n.
func Int(n int64) Value { return Value{IsInt: true, Int: n} }

// Bytes returns the bytes Value s.
func Bytes(s string) Value { return Value{Bytes: s} }

// Ptr returns a pointer to a copy of v, for CAS's Expected and New.
func Ptr(v Value) *Value { return &v }

// String returns v readably: an integer in decimal, bytes quoted.
func (v Value) String() string {
	if v.IsInt {
		return strconv.FormatInt(v.Int, 10)
	}
	return strconv.Quote(v.Bytes)
}

// describePtr describes an optional value: nil, or the value.
func describePtr(v *Value) string {
	if v == nil {
		return "nil"
	}
	return v.String()
}
