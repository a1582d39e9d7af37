package model

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// NoExpiry is the TTL, in milliseconds, of a live key without a deadline.
const NoExpiry int64 = -1

// Entry is a key row: a value and its deadline in unix milliseconds
// (0 = none).
type Entry struct {
	Value     Value
	ExpiresAt int64
}

// Live reports whether the row is live at nowMillis: it has no deadline or
// its deadline is after now. A row whose deadline equals now is expired.
func (e Entry) Live(nowMillis int64) bool {
	return e.ExpiresAt == 0 || e.ExpiresAt > nowMillis
}

// LeaseRow is a lease row: the owner of the latest grant, its fencing token
// and its deadline in unix milliseconds (0 = released). Rows are never
// deleted, so tokens only grow.
type LeaseRow struct {
	Owner     string
	Token     int64
	ExpiresAt int64
}

// Live reports whether the lease is held at nowMillis: its deadline is after
// now. A released lease (ExpiresAt 0) is never live at a time the model
// takes (unix ms, at or after 0).
func (l LeaseRow) Live(nowMillis int64) bool { return l.ExpiresAt > nowMillis }

// State is the whole store: key rows and lease rows, in separate namespaces.
// A nil map is the same as an empty one. Step never modifies a State it is
// given; use Clone before changing one yourself.
type State struct {
	KV     map[string]Entry
	Leases map[string]LeaseRow
}

// NewState returns an empty State with both maps allocated.
func NewState() State {
	return State{KV: map[string]Entry{}, Leases: map[string]LeaseRow{}}
}

// Clone returns a deep copy of s, with both maps allocated.
func (s State) Clone() State {
	c := State{KV: make(map[string]Entry, len(s.KV)), Leases: make(map[string]LeaseRow, len(s.Leases))}
	for k, e := range s.KV {
		c.KV[k] = e
	}
	for k, l := range s.Leases {
		c.Leases[k] = l
	}
	return c
}

// Equal reports whether a and b hold the same rows. Nil and empty maps are
// equal.
func Equal(a, b State) bool {
	if len(a.KV) != len(b.KV) || len(a.Leases) != len(b.Leases) {
		return false
	}
	for k, e := range a.KV {
		if f, ok := b.KV[k]; !ok || f != e {
			return false
		}
	}
	for k, l := range a.Leases {
		if m, ok := b.Leases[k]; !ok || m != l {
			return false
		}
	}
	return true
}

// Hash returns a deterministic 64-bit FNV-1a hash of s; Equal states have
// equal hashes.
func (s State) Hash() uint64 {
	h := fnv.New64a()
	var buf [8]byte
	putInt := func(n int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(n))
		h.Write(buf[:])
	}
	putStr := func(x string) {
		putInt(int64(len(x)))
		h.Write([]byte(x))
	}
	putInt(int64(len(s.KV)))
	for _, k := range sortedKeys(s.KV) {
		e := s.KV[k]
		putStr(k)
		if e.Value.IsInt {
			putInt(1)
			putInt(e.Value.Int)
		} else {
			putInt(0)
			putStr(e.Value.Bytes)
		}
		putInt(e.ExpiresAt)
	}
	putInt(int64(len(s.Leases)))
	for _, k := range sortedKeys(s.Leases) {
		l := s.Leases[k]
		putStr(k)
		putStr(l.Owner)
		putInt(l.Token)
		putInt(l.ExpiresAt)
	}
	return h.Sum64()
}

// String returns a canonical description of s, keys sorted, such as
// {kv: "a"=7 exp@1500, "b"="x"; leases: "l"=owner "o1" #3 exp@2000}.
// Equal states have equal strings.
func (s State) String() string {
	var b strings.Builder
	b.WriteString("{kv:")
	for i, k := range sortedKeys(s.KV) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %q=%s", k, s.KV[k])
	}
	b.WriteString("; leases:")
	for i, k := range sortedKeys(s.Leases) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %q=%s", k, s.Leases[k])
	}
	b.WriteByte('}')
	return b.String()
}

// String describes the row: its value, and its deadline when it has one.
func (e Entry) String() string {
	if e.ExpiresAt == 0 {
		return e.Value.String()
	}
	return fmt.Sprintf("%s exp@%d", e.Value, e.ExpiresAt)
}

// String describes the lease row: owner, token and deadline (or released).
func (l LeaseRow) String() string {
	if l.ExpiresAt == 0 {
		return fmt.Sprintf("owner %q #%d released", l.Owner, l.Token)
	}
	return fmt.Sprintf("owner %q #%d exp@%d", l.Owner, l.Token, l.ExpiresAt)
}

// sortedKeys returns the keys of m in increasing order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
