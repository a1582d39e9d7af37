package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// TestInfoDisagreesCountsTheRows holds Stats to rows at Stats' time: each
// count off by one is reported, and the expired keys may be short only by
// the keys a sweep of the window deleted or may have deleted.
func TestInfoDisagreesCountsTheRows(t *testing.T) {
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
	assert.Empty(t, infoDisagrees(good, rows, leases, sweepWatch{}))

	for name, tc := range map[string]struct {
		change func(*state.Stats)
		watch  sweepWatch
		want   string
	}{
		"an expired key counted live": {func(s *state.Stats) { s.Keys, s.ExpiredKeys = 3, 1 }, sweepWatch{}, "live keys 3, the rows say 2"},
		"a key's deadline left out":   {func(s *state.Stats) { s.KeysWithDeadline = 0 }, sweepWatch{}, "live keys with a deadline 0"},
		"a lapsed lease held":         {func(s *state.Stats) { s.Leases = 2 }, sweepWatch{}, "leases held 2, the rows say 1"},
		"a free lease left out":       {func(s *state.Stats) { s.LeaseNames = 2 }, sweepWatch{}, "lease names 2, the rows say 3"},
		"an expired key missing":      {func(s *state.Stats) { s.ExpiredKeys = 1 }, sweepWatch{}, "expired keys 1, the rows say 2 (0 of them"},
		"one swept, one more missing": {func(s *state.Stats) { s.ExpiredKeys = 0 }, sweepWatch{deleted: []string{"d"}}, "expired keys 0, the rows say 2 (1 of them"},
		"another key swept":           {func(s *state.Stats) { s.ExpiredKeys = 1 }, sweepWatch{deleted: []string{"a", "b"}}, "expired keys 1"},
		"a failed sweep's cutoff short of the missing key": {func(s *state.Stats) { s.ExpiredKeys = 0 },
			sweepWatch{cutoffMax: now - 1}, "(1 of them"},
		"an expired key too many":  {func(s *state.Stats) { s.ExpiredKeys = 3 }, sweepWatch{deleted: []string{"c"}}, "expired keys 3"},
		"an old schema":            {func(s *state.Stats) { s.SchemaVersion = 0 }, sweepWatch{}, "schema version 0"},
		"more free pages than all": {func(s *state.Stats) { s.FreePages = 6 }, sweepWatch{}, "5 pages of 4096 bytes, 6 free"},
	} {
		s := good
		tc.change(&s)
		assert.Contains(t, infoDisagrees(s, rows, leases, tc.watch), tc.want, name)
	}

	// What a sweep of the window deleted, or may have, may be missing.
	for name, tc := range map[string]struct {
		expired int64
		watch   sweepWatch
	}{
		"both swept":                          {0, sweepWatch{deleted: []string{"c", "d"}}},
		"one swept":                           {1, sweepWatch{deleted: []string{"c"}}},
		"a failed sweep reached both":         {0, sweepWatch{cutoffMax: now}},
		"a failed sweep reached the older":    {1, sweepWatch{cutoffMax: now - 50}},
		"swept, and not deleted after all":    {2, sweepWatch{deleted: []string{"c", "d"}}},
		"a failed sweep that deleted nothing": {2, sweepWatch{cutoffMax: now}},
	} {
		s := good
		s.ExpiredKeys = tc.expired
		assert.Empty(t, infoDisagrees(s, rows, leases, tc.watch), name)
	}
}

// TestStatsUnsoundOnItsOwn lists what no file's rows could explain.
func TestStatsUnsoundOnItsOwn(t *testing.T) {
	good := state.Stats{SchemaVersion: state.SchemaVersion, Keys: 2, KeysWithDeadline: 2, Leases: 1, LeaseNames: 1,
		PageSize: 4096, Pages: 2, Wall: time.UnixMilli(1_000_000), HighWater: time.UnixMilli(1_000_000)}
	assert.Empty(t, statsUnsound(good))
	behind := good
	behind.HighWater = behind.Wall.Add(state.HighWaterLead + time.Second)
	behind.ClockBehind = time.Second
	assert.Empty(t, statsUnsound(behind), "a clock behind the mark, said")
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
		assert.Len(t, statsUnsound(s), 1, name)
	}
}

// infoWorld runs a process that sets the keys, half of them for 10 ms,
// and then, 100 ms later, the info check on its handle, with bugs planted.
func infoWorld(t *testing.T, planted bugs.Set) *world {
	t.Helper()
	cfg := DefaultConfig(1)
	cfg.Bugs = planted
	w := newWorld(cfg)
	t.Cleanup(func() { assert.True(t, w.teardown(), "the handle closes") })
	p := w.procs[0]
	require.True(t, w.start(p))
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	w.sched.spawn(kindTask, "writer", p, w.newClient(), func(th *thread) {
		for i, k := range w.keys {
			w.verb(th, p, th.client, &model.Input{Kind: model.Set, Key: k, Value: model.Int(1), TTLMillis: int64(i%2) * 10})
		}
	})
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	w.advance(100)
	checked := false
	w.sched.spawn(kindTask, "info", p, w.newClient(), func(th *thread) { checked = w.infoCheck(th, p) })
	require.True(t, w.runUntil(func() bool { return w.sched.count(kindTask) == 0 }))
	require.True(t, checked, "the info check made its calls")
	return w
}

// The verifier's info check passes on the engine as it is, and fails when
// Stats counts expired keys as live.
func TestInfoCheckCanFail(t *testing.T) {
	w := infoWorld(t, bugs.Set{})
	assert.Empty(t, w.violations)
	w = infoWorld(t, bugs.Set{}.With(bugs.StatsCountsExpired))
	assert.Equal(t, []string{CheckInfo}, failed(w))
}
