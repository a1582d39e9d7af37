package linearizability

import (
	"strings"

	"github.com/statekit/statekit/model"
)

// partition names one key's history: a key row or a lease.
type partition struct {
	lease bool
	key   string
}

// String returns "k:"+key for a key row, "l:"+name for a lease.
func (p partition) String() string {
	if p.lease {
		return "l:" + p.key
	}
	return "k:" + p.key
}

// cell is one partition's row: absent, or a key row or a lease row
// (whichever the partition holds). It is comparable.
type cell struct {
	has   bool
	entry model.Entry
	lease model.LeaseRow
}

// toState returns the model State holding only c, in p's namespace.
func (p partition) toState(c cell) model.State {
	var s model.State
	if !c.has {
		return s
	}
	if p.lease {
		s.Leases = map[string]model.LeaseRow{p.key: c.lease}
	} else {
		s.KV = map[string]model.Entry{p.key: c.entry}
	}
	return s
}

// fromState returns p's row of s.
func (p partition) fromState(s model.State) cell {
	if p.lease {
		l, ok := s.Leases[p.key]
		return cell{has: ok, lease: l}
	}
	e, ok := s.KV[p.key]
	return cell{has: ok, entry: e}
}

// describe returns c readably in p's namespace.
func (p partition) describe(c cell) string {
	switch {
	case !c.has:
		return "absent"
	case p.lease:
		return c.lease.String()
	}
	return c.entry.String()
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
	}
	return int64Cmp(a.lease.ExpiresAt, b.lease.ExpiresAt)
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
