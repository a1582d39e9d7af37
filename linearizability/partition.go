package linearizability

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/statekit/statekit/model"
)

// partition names one part of the history checked on its own: a key row,
// a lease, or a group of keys that share a hash tag (groupTag).
type partition struct {
	lease bool
	group bool   // key is a hash tag: every key row with that tag
	key   string // the key, the lease's name, or the group's tag
}

// keyPartition returns the partition of key row k: its group's when k has
// a hash tag, else its own.
func keyPartition(k string) partition {
	if tag, ok := groupTag(k); ok {
		return partition{group: true, key: tag}
	}
	return partition{key: k}
}

// groupTag returns k's hash tag as Redis Cluster finds it: the text between
// the first "{" and the first "}" after it, when that is not empty. Keys
// with one tag are checked together, as one partition.
func groupTag(k string) (string, bool) {
	open := strings.IndexByte(k, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(k[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return k[open+1 : open+1+end], true
}

// String returns "k:"+key for a key row, "l:"+name for a lease and
// "g:"+tag for a group of keys.
func (p partition) String() string {
	switch {
	case p.lease:
		return "l:" + p.key
	case p.group:
		return "g:" + p.key
	}
	return "k:" + p.key
}

// holds reports whether key row k is in p.
func (p partition) holds(k string) bool {
	return !p.lease && keyPartition(k) == p
}

// cell is one partition's row: absent, or a key row or a lease row
// (whichever the partition holds); a group's rows are encoded in rows
// (encodeRows), has set when there is one. It is comparable.
type cell struct {
	has   bool
	entry model.Entry
	lease model.LeaseRow
	rows  string
	// span, when not 0, makes c a run: span+1 rows alike but for their
	// deadlines, the key row's, the lease's, or those of the group's rows
	// runKeys names (sorted, joined by NUL, which no key holds), which move
	// together: the first of them is any one from the deadline c holds to
	// that plus span, and each other keeps its distance from it
	// (window.go). Only in a state whose row no power loss can roll back
	// (partition.runnable).
	span    int64
	runKeys string
}

// toState returns the model State holding only c, in p's namespace; a
// run's first row.
func (p partition) toState(c cell) model.State {
	var s model.State
	switch {
	case !c.has:
	case p.lease:
		s.Leases = map[string]model.LeaseRow{p.key: c.lease}
	case p.group:
		s.KV = decodeRows(c.rows)
	default:
		s.KV = map[string]model.Entry{p.key: c.entry}
	}
	return s
}

// fromState returns p's row of s.
func (p partition) fromState(s model.State) cell {
	switch {
	case p.lease:
		l, ok := s.Leases[p.key]
		return cell{has: ok, lease: l}
	case p.group:
		rows := encodeRows(s.KV, p.holds)
		return cell{has: rows != "", rows: rows}
	}
	e, ok := s.KV[p.key]
	return cell{has: ok, entry: e}
}

// describe returns c readably in p's namespace; a group's rows as
// `{t}a=7, {t}b="x" until 40`.
func (p partition) describe(c cell) string {
	switch {
	case !c.has:
		return "absent"
	case c.span > 0:
		return p.describe(p.member(c, p.runDeadline(c))) + describeRun(p, c)
	case p.lease:
		return c.lease.String()
	case p.group:
		kv := decodeRows(c.rows)
		var parts []string
		for _, k := range sortedKeys(kv) {
			parts = append(parts, k+"="+kv[k].String())
		}
		return strings.Join(parts, ", ")
	}
	return c.entry.String()
}

// encodeRows encodes the rows of kv whose keys keep takes, in key order,
// as a comparable string: each key, its value (an integer, or bytes) and
// its deadline. No rows encode as "".
func encodeRows(kv map[string]model.Entry, keep func(string) bool) string {
	var b []byte
	for _, k := range sortedKeys(kv) {
		if !keep(k) {
			continue
		}
		e := kv[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		if e.Value.IsInt {
			b = append(b, 1)
			b = binary.AppendVarint(b, e.Value.Int)
		} else {
			b = append(b, 0)
			b = binary.AppendUvarint(b, uint64(len(e.Value.Bytes)))
			b = append(b, e.Value.Bytes...)
		}
		b = binary.AppendVarint(b, e.ExpiresAt)
	}
	return string(b)
}

// decodeRows returns the rows encodeRows encoded.
func decodeRows(s string) map[string]model.Entry {
	kv := map[string]model.Entry{}
	b := []byte(s)
	str := func() string {
		n, w := binary.Uvarint(b)
		v := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return v
	}
	for len(b) > 0 {
		k := str()
		var e model.Entry
		isInt := b[0] == 1
		b = b[1:]
		if isInt {
			v, w := binary.Varint(b)
			b = b[w:]
			e.Value = model.Int(v)
		} else {
			e.Value = model.Bytes(str())
		}
		at, w := binary.Varint(b)
		b = b[w:]
		e.ExpiresAt = at
		kv[k] = e
	}
	return kv
}

// sortedKeys returns kv's keys in byte order.
func sortedKeys(kv map[string]model.Entry) []string {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compareCells orders cells by every field, for canonical candidate sets.
func compareCells(a, b cell) int {
	switch {
	case a.has != b.has:
		return boolCmp(a.has, b.has)
	case a.entry.Value.IsInt != b.entry.Value.IsInt:
		return boolCmp(a.entry.Value.IsInt, b.entry.Value.IsInt)
	case a.entry.Value.Int != b.entry.Value.Int:
		return int64Cmp(a.entry.Value.Int, b.entry.Value.Int)
	case a.entry.Value.Bytes != b.entry.Value.Bytes:
		return strings.Compare(a.entry.Value.Bytes, b.entry.Value.Bytes)
	case a.entry.ExpiresAt != b.entry.ExpiresAt:
		return int64Cmp(a.entry.ExpiresAt, b.entry.ExpiresAt)
	case a.lease.Owner != b.lease.Owner:
		return strings.Compare(a.lease.Owner, b.lease.Owner)
	case a.lease.Token != b.lease.Token:
		return int64Cmp(a.lease.Token, b.lease.Token)
	case a.lease.ExpiresAt != b.lease.ExpiresAt:
		return int64Cmp(a.lease.ExpiresAt, b.lease.ExpiresAt)
	case a.span != b.span:
		return int64Cmp(a.span, b.span)
	case a.rows != b.rows:
		return strings.Compare(a.rows, b.rows)
	}
	return strings.Compare(a.runKeys, b.runKeys)
}

func boolCmp(a, b bool) int {
	if !a && b {
		return -1
	}
	if a && !b {
		return 1
	}
	return 0
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
