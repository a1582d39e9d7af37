package model

import "strings"

// KeyRow is one key row as Scan lists it: the key and its row.
type KeyRow struct {
	Key string
	Entry
}

// NamedLease is one lease row as Leases lists it: the name and its row.
type NamedLease struct {
	Name string
	LeaseRow
}

// scan lists the key rows whose key starts with prefix, in byte order of the
// keys: the live ones, and with all also the expired rows no one deleted.
func scan(s State, prefix string, all bool, nowMillis int64) Output {
	out := Output{Rows: []KeyRow{}}
	for _, k := range sortedKeys(s.KV) {
		if e := s.KV[k]; strings.HasPrefix(k, prefix) && (all || e.Live(nowMillis)) {
			out.Rows = append(out.Rows, KeyRow{Key: k, Entry: e})
		}
	}
	return out
}

// listLeases lists the lease rows whose name starts with prefix, in byte
// order of the names: the held ones, and with all also the free ones
// (expired or released).
func listLeases(s State, prefix string, all bool, nowMillis int64) Output {
	out := Output{Leases: []NamedLease{}}
	for _, n := range sortedKeys(s.Leases) {
		if l := s.Leases[n]; strings.HasPrefix(n, prefix) && (all || l.Live(nowMillis)) {
			out.Leases = append(out.Leases, NamedLease{Name: n, LeaseRow: l})
		}
	}
	return out
}
