package state

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what the engine stores. Bigger input fails with a clear error
// and writes nothing.
const (
	// MaxKeyBytes is the longest key, lease name or lease owner, in bytes.
	MaxKeyBytes = 1024
	// MaxValueBytes is the longest bytes value.
	MaxValueBytes = 1 << 20
)

// NoExpiry is what TTL answers for a live key without a deadline.
const NoExpiry time.Duration = -1

// Value is a stored value: an integer or bytes. The zero Value is the empty
// bytes value.
type Value struct {
	isInt bool
	i     int64
	b     []byte
}

// IntValue returns an integer Value.
func IntValue(i int64) Value { return Value{isInt: true, i: i} }

// BytesValue returns a bytes Value holding a copy of b.
func BytesValue(b []byte) Value { return Value{b: bytes.Clone(b)} }

// Int returns the integer and true when v is an integer, or 0 and false
// when v is bytes (bytes are never parsed as a number).
func (v Value) Int() (int64, bool) {
	if v.isInt {
		return v.i, true
	}
	return 0, false
}

// IsInt reports whether v is an integer.
func (v Value) IsInt() bool { return v.isInt }

// Bytes returns the bytes of v, or the decimal text of an integer.
func (v Value) Bytes() []byte {
	if v.isInt {
		return strconv.AppendInt(nil, v.i, 10)
	}
	return v.b
}

// String returns v as text: the bytes, or the decimal text of an integer.
func (v Value) String() string {
	if v.isInt {
		return strconv.FormatInt(v.i, 10)
	}
	return string(v.b)
}

// Equal reports whether v and w have the same type and content.
func (v Value) Equal(w Value) bool {
	if v.isInt != w.isInt {
		return false
	}
	if v.isInt {
		return v.i == w.i
	}
	return bytes.Equal(v.b, w.b)
}

// sqlArg returns the value as an SQLite parameter: int64 for an integer
// (an SQLite INTEGER), []byte for bytes (a BLOB, never TEXT, so SQLite never
// compares it as a number).
func (v Value) sqlArg() any {
	if v.isInt {
		return v.i
	}
	if v.b == nil {
		return []byte{}
	}
	return v.b
}

// sqlType is SQLite's typeof() of the stored value.
func (v Value) sqlType() string {
	if v.isInt {
		return "integer"
	}
	return "blob"
}

// toValue converts a caller's value: int, int64, string, []byte or Value.
func toValue(x any) (Value, error) {
	var v Value
	switch t := x.(type) {
	case int:
		v = IntValue(int64(t))
	case int64:
		v = IntValue(t)
	case string:
		v = Value{b: []byte(t)}
	case []byte:
		v = BytesValue(t)
	case Value:
		v = t
	case nil:
		return Value{}, fmt.Errorf("%w: nil (use Del to delete)", ErrInvalidValue)
	default:
		return Value{}, fmt.Errorf("%w: unsupported type %T (want int, int64, string, []byte or state.Value)", ErrInvalidValue, x)
	}
	if !v.isInt && len(v.b) > MaxValueBytes {
		return Value{}, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidValue, len(v.b), MaxValueBytes)
	}
	return v, nil
}

// fromSQL converts a column read from the kv table.
func fromSQL(x any) (Value, error) {
	switch t := x.(type) {
	case int64:
		return IntValue(t), nil
	case []byte:
		return BytesValue(t), nil
	case string:
		return Value{b: []byte(t)}, nil
	}
	return Value{}, fmt.Errorf("%w: stored value has type %T", ErrCorrupt, x)
}

// checkKey validates a key or lease name; what names it in errors.
func checkKey(what, k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidKey, what)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrInvalidKey, what, len(k), MaxKeyBytes)
	case !utf8.ValidString(k):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidKey, what)
	case strings.IndexByte(k, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidKey, what)
	}
	return nil
}

// checkOwner validates a lease owner.
func checkOwner(o string) error {
	switch {
	case o == "":
		return fmt.Errorf("%w: lease owner is empty", ErrInvalidArgument)
	case len(o) > MaxKeyBytes:
		return fmt.Errorf("%w: lease owner is %d bytes, over the %d-byte limit", ErrInvalidArgument, len(o), MaxKeyBytes)
	}
	return nil
}

// ttlMillis converts a positive TTL to whole milliseconds, rounding up so a
// key lives at least as long as asked in the engine's time. That time counts
// whole milliseconds, so by the monotonic clock a key written late in one
// lives up to 1 ms less.
func ttlMillis(d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("%w: %v is not positive", ErrInvalidTTL, d)
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms, nil
}

// millisDuration converts a count of milliseconds (a deadline minus now) to
// a Duration, clamped to the Duration range: a TTL of up to
// time.Duration(math.MaxInt64), rounded up to whole milliseconds, is
// stored, and its ms times a million would not fit.
func millisDuration(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > most:
		return time.Duration(math.MaxInt64)
	case ms < -most:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
