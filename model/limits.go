package model

import (
	"strings"
	"unicode/utf8"
)

// The engine's limits on input (state.MaxKeyBytes, state.MaxValueBytes):
// input past them is refused with ErrInvalid.
const (
	maxKeyBytes   = 1 << 10 // the longest key, lease name or lease owner
	maxValueBytes = 1 << 20 // the longest bytes value
)

// badKey reports a key or lease name the spec refuses: empty, over
// maxKeyBytes, not valid UTF-8, or holding a NUL byte.
func badKey(k string) bool {
	return k == "" || len(k) > maxKeyBytes || !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0
}

// badOwner reports a lease owner the spec refuses: empty or over
// maxKeyBytes. Any other bytes are an owner.
func badOwner(o string) bool { return o == "" || len(o) > maxKeyBytes }

// badValue reports a value the spec refuses: bytes over maxValueBytes. A
// nil value (CAS's absent or delete) is not bad.
func badValue(v *Value) bool { return v != nil && !v.IsInt && len(v.Bytes) > maxValueBytes }
