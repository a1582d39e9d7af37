package checks

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/statekit/statekit/state"
)

// swept says a key may have been swept when deleted names it or its
// deadline is at or before cutoff.
func swept(deleted []string, cutoff int64) func(state.KeyInfo) bool {
	return func(k state.KeyInfo) bool { return slices.Contains(deleted, k.Key) || k.Expires.UnixMilli() <= cutoff }
}

// TestStatsRowsCountsTheRows holds Stats to rows at Stats' time: each
// count off by one is reported, and the expired keys may be short only by
// the keys a sweep of the window deleted or may have deleted.
func TestStatsRowsCountsTheRows(t *testing.T) {
	const now = 10_000
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	rows := []state.KeyInfo{
		{Key: "a"},                       // no deadline
		{Key: "b", Expires: at(now + 1)}, // live, with a deadline
		{Key: "c", Expires: at(now)},     // expired at now
		{Key: "d", Expires: at(now - 50)},
	}
	leases := []state.LeaseInfo{
		{Name: "held", Expires: at(now + 1)},
		{Name: "lapsed", Expires: at(now)},
		{Name: "released"},
	}
	good := state.Stats{SchemaVersion: state.SchemaVersion, Keys: 2, KeysWithDeadline: 1, ExpiredKeys: 2,
		Leases: 1, LeaseNames: 3, PageSize: 4096, Pages: 5, FreePages: 1, Now: at(now)}
	assert.Empty(t, StatsRows(good, rows, leases, nil))

	for name, tc := range map[string]struct {
		change func(*state.Stats)
		watch  func(state.KeyInfo) bool
		want   string
	}{
		"an expired key counted live": {func(s *state.Stats) { s.Keys, s.ExpiredKeys = 3, 1 }, nil, "live keys 3, the rows say 2"},
		"a key's deadline left out":   {func(s *state.Stats) { s.KeysWithDeadline = 0 }, nil, "live keys with a deadline 0"},
		"a lapsed lease held":         {func(s *state.Stats) { s.Leases = 2 }, nil, "leases held 2, the rows say 1"},
		"a free lease left out":       {func(s *state.Stats) { s.LeaseNames = 2 }, nil, "lease names 2, the rows say 3"},
		"an expired key missing":      {func(s *state.Stats) { s.ExpiredKeys = 1 }, nil, "expired keys 1, the rows say 2 (0 of them"},
		"one swept, one more missing": {func(s *state.Stats) { s.ExpiredKeys = 0 }, swept([]string{"d"}, 0), "expired keys 0, the rows say 2 (1 of them"},
		"another key swept":           {func(s *state.Stats) { s.ExpiredKeys = 1 }, swept([]string{"a", "b"}, 0), "expired keys 1"},
		"a failed sweep's cutoff short of the missing key": {func(s *state.Stats) { s.ExpiredKeys = 0 },
			swept(nil, now-1), "(1 of them"},
		"an expired key too many":  {func(s *state.Stats) { s.ExpiredKeys = 3 }, swept([]string{"c"}, 0), "expired keys 3"},
		"an old schema":            {func(s *state.Stats) { s.SchemaVersion = 0 }, nil, "schema version 0"},
		"more free pages than all": {func(s *state.Stats) { s.FreePages = 6 }, nil, "5 pages of 4096 bytes, 6 free"},
	} {
		s := good
		tc.change(&s)
		assert.Contains(t, StatsRows(s, rows, leases, tc.watch), tc.want, name)
	}

	// What a sweep of the window deleted, or may have, may be missing.
	for name, tc := range map[string]struct {
		expired int64
		watch   func(state.KeyInfo) bool
	}{
		"both swept":                          {0, swept([]string{"c", "d"}, 0)},
		"one swept":                           {1, swept([]string{"c"}, 0)},
		"a failed sweep reached both":         {0, swept(nil, now)},
		"a failed sweep reached the older":    {1, swept(nil, now-50)},
		"swept, and not deleted after all":    {2, swept([]string{"c", "d"}, 0)},
		"a failed sweep that deleted nothing": {2, swept(nil, now)},
	} {
		s := good
		s.ExpiredKeys = tc.expired
		assert.Empty(t, StatsRows(s, rows, leases, tc.watch), name)
	}
}

// TestStatsUnsoundOnItsOwn lists what no file's rows could explain.
func TestStatsUnsoundOnItsOwn(t *testing.T) {
	good := state.Stats{SchemaVersion: state.SchemaVersion, Keys: 2, KeysWithDeadline: 2, Leases: 1, LeaseNames: 1,
		PageSize: 4096, Pages: 2, Wall: time.UnixMilli(1_000_000), HighWater: time.UnixMilli(1_000_000)}
	assert.Empty(t, StatsUnsound(good))
	behind := good
	behind.HighWater = behind.Wall.Add(state.HighWaterLead + time.Second)
	behind.ClockBehind = time.Second
	assert.Empty(t, StatsUnsound(behind), "a clock behind the mark, said")
	for name, change := range map[string]func(*state.Stats){
		"more keys with a deadline than live": func(s *state.Stats) { s.KeysWithDeadline = 3 },
		"negative expired keys":               func(s *state.Stats) { s.ExpiredKeys = -1 },
		"more leases held than names":         func(s *state.Stats) { s.Leases = 2 },
		"no pages":                            func(s *state.Stats) { s.Pages = 0 },
		"no page size":                        func(s *state.Stats) { s.PageSize = 0 },
		"a newer schema":                      func(s *state.Stats) { s.SchemaVersion++ },
		"the clock behind, not said": func(s *state.Stats) {
			s.HighWater = s.Wall.Add(state.HighWaterLead + time.Millisecond)
		},
		"the clock said behind within the lead": func(s *state.Stats) {
			s.HighWater, s.ClockBehind = s.Wall.Add(state.HighWaterLead), time.Millisecond
		},
	} {
		s := good
		change(&s)
		assert.Len(t, StatsUnsound(s), 1, name)
	}
}
