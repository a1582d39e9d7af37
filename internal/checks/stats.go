package checks

import (
	"fmt"
	"strings"

	"github.com/statekit/statekit/state"
)

// Stats: what statectl info prints (state.DB.Stats) against the rows.
// StatsUnsound finds what is wrong with one answer on its own; StatsRows
// holds its counts to every row of the file read just before it, by a
// handle alone on the file; WritableMark holds the high-water mark a
// writable handle read to its own time.

// StatsUnsound lists what is wrong with s whatever the rows: a schema
// version other than this statekit's, counts out of order, a ClockBehind
// other than its definition, page counts that cannot be.
func StatsUnsound(s state.Stats) []string {
	var bad []string
	if s.SchemaVersion != state.SchemaVersion {
		bad = append(bad, fmt.Sprintf("schema version %d, want %d", s.SchemaVersion, state.SchemaVersion))
	}
	if s.KeysWithDeadline < 0 || s.KeysWithDeadline > s.Keys || s.ExpiredKeys < 0 {
		bad = append(bad, fmt.Sprintf("%d live keys, %d of them with a deadline, %d expired", s.Keys, s.KeysWithDeadline, s.ExpiredKeys))
	}
	if s.Leases < 0 || s.Leases > s.LeaseNames {
		bad = append(bad, fmt.Sprintf("%d leases held of %d", s.Leases, s.LeaseNames))
	}
	if want := max(0, s.HighWater.Sub(s.Wall)-state.HighWaterLead); s.ClockBehind != want {
		bad = append(bad, fmt.Sprintf("the clock %v behind, want %v (the mark %d, the wall clock %d)",
			s.ClockBehind, want, s.HighWater.UnixMilli(), s.Wall.UnixMilli()))
	}
	if s.PageSize <= 0 || s.Pages <= 0 || s.FreePages < 0 || s.FreePages > s.Pages {
		bad = append(bad, fmt.Sprintf("%d pages of %d bytes, %d free", s.Pages, s.PageSize, s.FreePages))
	}
	return bad
}

// StatsRows holds s to rows and leases, every key row and lease row of the
// file read just before it (Scan and Leases with the expired and free
// ones), counted at s.Now: live keys, those with a deadline, leases held
// and lease names exactly. Only sweeps may have changed the file between,
// and a sweep deletes only keys past their deadline, so the expired keys
// may be short by the rows mayBeSwept says a sweep deleted, or may have;
// nil mayBeSwept: none. It returns what disagrees, "" when nothing does.
func StatsRows(s state.Stats, rows []state.KeyInfo, leases []state.LeaseInfo, mayBeSwept func(state.KeyInfo) bool) string {
	now := s.Now.UnixMilli()
	var live, deadline, expired, mayBeGone, held int64
	for _, k := range rows {
		switch {
		case k.Expires.IsZero():
			live++
		case k.Expires.UnixMilli() > now:
			live++
			deadline++
		default:
			expired++
			if mayBeSwept != nil && mayBeSwept(k) {
				mayBeGone++
			}
		}
	}
	for _, l := range leases {
		if !l.Expires.IsZero() && l.Expires.UnixMilli() > now {
			held++
		}
	}
	var bad []string
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"live keys", s.Keys, live},
		{"live keys with a deadline", s.KeysWithDeadline, deadline},
		{"leases held", s.Leases, held},
		{"lease names", s.LeaseNames, int64(len(leases))},
	} {
		if c.got != c.want {
			bad = append(bad, fmt.Sprintf("%s %d, the rows say %d", c.what, c.got, c.want))
		}
	}
	if s.ExpiredKeys > expired || s.ExpiredKeys < expired-mayBeGone {
		bad = append(bad, fmt.Sprintf("expired keys %d, the rows say %d (%d of them may have been swept since)", s.ExpiredKeys, expired, mayBeGone))
	}
	bad = append(bad, StatsUnsound(s)...)
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("Stats at %d disagrees with the %d key rows and %d lease rows read just before: %s",
		now, len(rows), len(leases), strings.Join(bad, "; "))
}

// WritableMark says what is wrong with the high-water mark s read through
// a writable handle, "" when nothing: such a handle keeps a mark at or
// after every time it used, at most HighWaterLead ahead, and every other
// mark is at or before the time it started at.
func WritableMark(s state.Stats) string {
	hw, now := s.HighWater.UnixMilli(), s.Now.UnixMilli()
	if hw < now || hw > now+state.HighWaterLead.Milliseconds() {
		return fmt.Sprintf("Stats' high-water mark %d is not between its time %d and %v after it", hw, now, state.HighWaterLead)
	}
	return ""
}
