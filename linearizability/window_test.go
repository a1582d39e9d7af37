package linearizability

import (
	"slices"
	"testing"
	"time"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const runT0 = int64(1000) // around which the runs' deadlines and times are drawn

// groupRunKeys are the keys of the group partition the runs are drawn in.
var groupRunKeys = []string{"{g}a", "{g}b", "{g}c"}

// drawRunCell draws a row of p, a run of deadlines or one: a group's has
// up to three keys, a run up to three axes, each varying one or more of
// their deadlines together.
func drawRunCell(t *rapid.T, p partition) cell {
	deadline := func(label string) int64 { return runT0 + rapid.Int64Range(-4, 6).Draw(t, label) }
	value := func(label string) model.Value {
		if rapid.Bool().Draw(t, label+" bytes") {
			return model.Bytes("x")
		}
		return model.Int(rapid.Int64Range(0, 2).Draw(t, label))
	}
	c := cell{has: true}
	span := rapid.Int64Range(0, 6).Draw(t, "span")
	switch {
	case p.lease:
		c.lease = model.LeaseRow{Owner: rapid.SampledFrom([]string{"o1", "o2"}).Draw(t, "owner"),
			Token: rapid.Int64Range(1, 2).Draw(t, "token"), ExpiresAt: deadline("deadline")}
	case p.group:
		rows := map[string]model.Entry{}
		for _, k := range groupRunKeys {
			if rapid.Bool().Draw(t, k+" present") {
				e := model.Entry{Value: value(k + " value")}
				if rapid.Bool().Draw(t, k+" expires") {
					e.ExpiresAt = deadline(k + " deadline")
				}
				rows[k] = e
			}
		}
		c.rows = encodeRows(rows, func(string) bool { return true })
		c.has = c.rows != ""
		if span == 0 {
			return c
		}
		// Each deadline on one of up to three axes, or on none; the
		// first axis has span, the others spans of their own.
		axes := make([]axis, 3)
		for _, k := range sortedKeys(rows) {
			if rows[k].ExpiresAt != 0 {
				if i := rapid.IntRange(-1, 2).Draw(t, k+" axis"); i >= 0 {
					axes[i].keys = append(axes[i].keys, k)
				}
			}
		}
		for i := range axes {
			axes[i].span = span
			if i > 0 {
				axes[i].span = rapid.Int64Range(1, 4).Draw(t, "span of another axis")
			}
		}
		return p.box(c, axes)
	default:
		c.entry = model.Entry{Value: value("value"), ExpiresAt: deadline("deadline")}
	}
	c.span = span
	return c
}

// drawRunInput draws a call on p's row, or a sweep.
func drawRunInput(t *rapid.T, p partition, inUpdate bool) model.Input {
	ttl := func() int64 { return rapid.SampledFrom([]int64{0, 1, 3, 5}).Draw(t, "ttl") }
	if p.lease {
		owner := rapid.SampledFrom([]string{"o1", "o2"}).Draw(t, "owner")
		tok := rapid.Int64Range(1, 3).Draw(t, "token")
		switch rapid.IntRange(0, 4).Draw(t, "lease verb") {
		case 0:
			return model.Input{Kind: model.Lease, Key: p.key, Owner: owner, TTLMillis: 1 + ttl()}
		case 1:
			return model.Input{Kind: model.Renew, Key: p.key, Owner: owner, Token: tok, TTLMillis: 1 + ttl()}
		case 2:
			return model.Input{Kind: model.Release, Key: p.key, Owner: owner, Token: tok}
		case 3:
			return model.Input{Kind: model.Leases, All: rapid.Bool().Draw(t, "all")}
		}
		return model.Input{Kind: model.Sweep}
	}
	key := p.key
	if p.group {
		key = rapid.SampledFrom(groupRunKeys).Draw(t, "key")
	}
	v := model.Int(rapid.Int64Range(0, 2).Draw(t, "v"))
	kinds := 11 // 11: Scan
	if inUpdate {
		kinds = 8 // no Sweep, Scan or Update inside one
	}
	verb := rapid.IntRange(0, kinds).Draw(t, "verb")
	if p.group && !inUpdate && rapid.Bool().Draw(t, "update") {
		verb = 10 // most of what a group can do is in an Update
	}
	switch verb {
	case 0:
		return model.Input{Kind: model.Get, Key: key}
	case 1:
		return model.Input{Kind: model.Set, Key: key, Value: v, TTLMillis: ttl()}
	case 2:
		return model.Input{Kind: model.IncrBy, Key: key, Delta: 1, TTLMillis: ttl()}
	case 3:
		return model.Input{Kind: model.CAS, Key: key, Expected: &v, New: &v, TTLMillis: ttl()}
	case 4:
		return model.Input{Kind: model.CAS, Key: key, New: &v}
	case 5:
		return model.Input{Kind: model.Expire, Key: key, TTLMillis: rapid.Int64Range(-1, 4).Draw(t, "expire")}
	case 6:
		return model.Input{Kind: model.TTL, Key: key}
	case 7, 8:
		return model.Input{Kind: model.Del, Keys: []string{key}}
	case 9:
		return model.Input{Kind: model.Sweep}
	case 10:
		ops := make([]model.Input, rapid.IntRange(1, 3).Draw(t, "ops"))
		reads := rapid.IntRange(0, 2).Draw(t, "reads only") == 0 // a part per key: readaxes.go
		for i := range ops {
			ops[i] = drawRunInput(t, p, true)
			if reads {
				kind := rapid.SampledFrom([]model.Kind{model.Get, model.TTL}).Draw(t, "read")
				ops[i] = model.Input{Kind: kind, Key: rapid.SampledFrom(groupRunKeys).Draw(t, "read key")}
			}
		}
		return model.Input{Kind: model.Update, Ops: ops, Abort: rapid.IntRange(0, 4).Draw(t, "abort") == 0}
	}
	return model.Input{Kind: model.Scan, Key: "", All: rapid.Bool().Draw(t, "all")}
}

// sweptSome returns a group's row c with each set of its rows expired at
// now deleted.
func sweptSome(p partition, c cell, now int64) []pstate {
	kv := p.toState(c).KV
	var out []pstate
	for subset := range 1 << len(groupRunKeys) {
		left := map[string]model.Entry{}
		for i, k := range groupRunKeys {
			e, ok := kv[k]
			if ok && (e.Live(now) || subset&(1<<i) == 0) {
				left[k] = e
			}
		}
		d := cell{rows: encodeRows(left, func(string) bool { return true })}
		d.has = d.rows != ""
		out = append(out, makeState(d, []cell{d}))
	}
	return out
}

// rowsOf returns every one-row state that states stand for, sorted.
func rowsOf(t require.TestingT, p partition, states []pstate) []cell {
	var rows []cell
	for _, s := range states {
		require.True(t, s.cur.span == 0 || p.runnable(s), "a run in a state that may not hold one")
		for _, m := range p.members(s) {
			require.Len(t, m.cands, 1, "no power loss can come: nothing to roll back to")
			rows = append(rows, m.cur)
		}
	}
	slices.SortFunc(rows, compareCells)
	return slices.Compact(rows)
}

// A run of deadlines and a window of times are shorthand, never an
// approximation: stepping a run, or a call over a window, gives exactly
// the rows that stepping each of its members, at each of its times, gives,
// and merge puts the same rows in one form however they were split.
func TestRunsStepAsTheirMembers(t *testing.T) {
	for _, p := range []partition{{key: "k"}, {lease: true, key: "l"}, {group: true, key: "g"}} {
		t.Run(p.String(), func(t *testing.T) { runsStepAsTheirMembers(t, p) })
	}
}

func runsStepAsTheirMembers(t *testing.T, p partition) {
	rapid.Check(t, func(t *rapid.T) {
		stepsAsMembers(t, p, drawRunCell(t, p), drawRunInput(t, p, false))
	})
}

// A read whose answer is a part per key, of a box of two or three axes,
// is read axis by axis (readaxes.go): what it gives is what stepping each
// member gives. Such boxes are a small part of what drawRunCell draws.
func TestReadsOfABoxStepAsTheirMembers(t *testing.T) {
	p := partition{group: true, key: "g"}
	rapid.Check(t, func(t *rapid.T) {
		rows := map[string]model.Entry{}
		axes := make([]axis, 3)
		for _, k := range groupRunKeys {
			rows[k] = model.Entry{Value: model.Int(rapid.Int64Range(0, 1).Draw(t, k+" value")),
				ExpiresAt: runT0 + rapid.Int64Range(-4, 6).Draw(t, k+" deadline")}
			i := rapid.IntRange(0, 2).Draw(t, k+" axis")
			axes[i].keys = append(axes[i].keys, k)
		}
		for i := range axes {
			axes[i].span = rapid.Int64Range(1, 6).Draw(t, "span")
		}
		c := cell{has: true, rows: encodeRows(rows, func(string) bool { return true })}
		var in model.Input
		if rapid.Bool().Draw(t, "scan") {
			in = model.Input{Kind: model.Scan, All: rapid.Bool().Draw(t, "all")}
		} else {
			in = model.Input{Kind: model.Update, Abort: rapid.IntRange(0, 4).Draw(t, "abort") == 0}
			for range rapid.IntRange(1, 4).Draw(t, "reads") {
				kind := rapid.SampledFrom([]model.Kind{model.Get, model.TTL}).Draw(t, "read")
				in.Ops = append(in.Ops, model.Input{Kind: kind, Key: rapid.SampledFrom(groupRunKeys).Draw(t, "read key")})
			}
		}
		stepsAsMembers(t, p, p.box(c, axes), in)
	})
}

// stepsAsMembers checks that stepping from, a row or a run of p, with in
// (at a time drawn, known or lost over a window drawn) gives what stepping
// each of its members gives.
func stepsAsMembers(t *rapid.T, p partition, from cell, in model.Input) {
	s := makeState(from, []cell{from})
	members := p.members(s)
	st := &step{event: Verb, final: true, in: in}
	st.in.NowMillis = runT0 + rapid.Int64Range(-6, 12).Draw(t, "now")
	if p.group && st.in.Kind == model.Scan && rapid.Bool().Draw(t, "one key's rows") {
		st.only = rapid.SampledFrom(groupRunKeys).Draw(t, "only") // as a group's scan is checked
	}
	if st.in.Kind == model.Update && rapid.Bool().Draw(t, "some answers checked") {
		st.subCheck = rapid.SliceOfN(rapid.Bool(), len(st.in.Ops), len(st.in.Ops)).Draw(t, "checked")
	}
	var want []pstate
	if rapid.Bool().Draw(t, "unknown") {
		st.unknown = true
		st.nowLatest = st.in.NowMillis + rapid.Int64Range(0, 8).Draw(t, "window")
		for _, m := range members {
			want = append(want, m)
			for tm := st.in.NowMillis; tm <= st.nowLatest; tm++ {
				in := st.in
				in.NowMillis = tm
				if p.group && in.Kind == model.Sweep {
					// Cut short, a sweep may have deleted any of the
					// group's expired rows (partialSweeps).
					want = append(want, sweptSome(p, m.cur, tm)...)
					continue
				}
				next, _ := model.Step(p.toState(m.cur), in)
				c := p.fromState(next)
				want = append(want, makeState(c, []cell{c}))
			}
		}
	} else {
		// Answered as one member, drawn, answers: some members may
		// answer alike.
		st.check = true
		_, st.want = model.Step(p.toState(members[rapid.IntRange(0, len(members)-1).Draw(t, "answering")].cur), st.in)
		if st.only != "" {
			st.want.Rows = slices.DeleteFunc(st.want.Rows, func(r model.KeyRow) bool { return r.Key != st.only })
		}
		for _, m := range members {
			next, out := model.Step(p.toState(m.cur), st.in)
			if st.matches(out) {
				c := p.fromState(next)
				want = append(want, makeState(c, []cell{c}))
			}
		}
	}
	got := p.next(s, st, nil)
	require.Equal(t, rowsOf(t, p, want), rowsOf(t, p, got), "%s from %s: got %v", st, p.describeState(s), got)

	// Canonical for a key or a lease: merging the members one by one,
	// in any order, gives what merging the runs gives. (One row of a
	// group may join a run of any of its deadlines, so it joins none.)
	if p.group {
		return
	}
	var single []pstate
	for _, g := range got {
		single = append(single, p.members(g)...)
	}
	order := rapid.Permutation(single).Draw(t, "order")
	a, b := p.merge(order), p.merge(got)
	slices.SortFunc(a, func(x, y pstate) int { return compareCells(x.cur, y.cur) })
	slices.SortFunc(b, func(x, y pstate) int { return compareCells(x.cur, y.cur) })
	require.Equal(t, a, b)
}

// A lost write with a window of seconds, which stepped one millisecond at
// a time made a state for each, is one run: later calls step it in pieces,
// and read its deadline as any of the window's. The check runs without a
// time limit: a machine's speed decides nothing here. (A TTL read of a run
// still steps each member of the piece it reads, 50,000 here.)
func TestAWindowOfSecondsIsOneRun(t *testing.T) {
	const window = 100_000 // ms
	setTTL := model.Input{Kind: model.Set, Key: "a", Value: model.Int(1), TTLMillis: 1000}
	lost := func(c int, call int64) Op {
		op := unknown(c, call, t0, setTTL)
		op.NowLatest = t0 + window
		return op
	}
	ttlIs := func(c int, call, now, left int64) Op {
		return do(c, call, call+1, now, model.Input{Kind: model.TTL, Key: "a"}, model.Output{TTLMillis: left})
	}
	for _, c := range []checkCase{
		{name: "several lost writes, read within the window", verdict: Ok, history: []Op{
			lost(0, 1), lost(1, 2), lost(2, 3),
			ttlIs(3, 10, t0+window/2, 700), // ran at now-300
			do(3, 12, 13, t0+window/2+400, get("a"), val(model.Int(1))),
		}},
		{name: "a deadline no time of the window gives", verdict: Illegal, partition: "k:a", mentions: "ttl", history: []Op{
			lost(0, 1), lost(1, 2),
			ttlIs(3, 10, t0+window+5, 1000), // ran at now: after the window
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.history, 0)
			require.NoError(t, res.Err)
			require.Equal(t, c.verdict, res.Verdict, "%s\n%s", res, res.Description)
			if c.verdict == Illegal {
				require.Equal(t, c.partition, res.Partition)
				require.Contains(t, res.Description, c.mentions)
			}
		})
	}
}

// A lost transaction that set two of a group's deadlines from its one
// time, over a window of seconds, is one run of both moving together: a
// read of both in one transaction sees them the distance apart the
// transaction set, and nothing else. (Stepped one millisecond at a time, a
// window of one second took minutes.) The check runs without a time limit.
func TestDeadlinesSetFromOneTimeAreOneRun(t *testing.T) {
	const window = 100_000 // ms
	lost := func(c int, call int64) Op {
		op := unknown(c, call, t0, model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.Set, Key: "{g}a", Value: model.Int(1), TTLMillis: 1000},
			{Kind: model.Set, Key: "{g}b", Value: model.Int(1), TTLMillis: 2000},
		}})
		op.NowLatest = t0 + window
		return op
	}
	ttls := func(c int, call, now, a, b int64) Op {
		return do(c, call, call+1, now, model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.TTL, Key: "{g}a"}, {Kind: model.TTL, Key: "{g}b"},
		}}, model.Output{Sub: []model.Output{{TTLMillis: a}, {TTLMillis: b}}})
	}
	ttlsGone := func(c int, call, now, b int64) Op { // {g}a expired
		return do(c, call, call+1, now, model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.TTL, Key: "{g}a"}, {Kind: model.TTL, Key: "{g}b"},
		}}, model.Output{Sub: []model.Output{{Err: model.ErrNotFound}, {TTLMillis: b}}})
	}
	history := func(reads ...Op) []Op {
		h := []Op{lost(0, 1), lost(1, 2), lost(2, 3)}
		for i := range 300 { // later calls step the run, not each of its members
			h = append(h, do(3, int64(4+2*i), int64(5+2*i), t0+int64(i), incr("{g}c"), model.Output{Int: int64(i + 1)}))
		}
		return append(h, reads...)
	}
	for _, c := range []checkCase{
		{name: "read the distance apart they were set", verdict: Ok, history: history(
			ttls(4, 1000, t0+window/2, 700, 1700), // ran at now-300
		)},
		{name: "read another distance apart", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(
			ttls(4, 1000, t0+window/2, 700, 1500),
		)},
		{name: "one expired, the other live", verdict: Ok, history: history(
			ttlsGone(4, 1000, t0+window+1500, 500), // ran at now-1500
		)},
		{name: "a deadline no time of the window gives", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(
			ttls(4, 1000, t0+window+5, 1000, 2000), // ran at now: after the window
		)},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.history, 0)
			require.NoError(t, res.Err)
			require.Equal(t, c.verdict, res.Verdict, "%s\n%s", res, res.Description)
			if c.verdict == Illegal {
				require.Equal(t, c.partition, res.Partition)
				require.Contains(t, res.Description, c.mentions)
			}
		})
	}
}

// Lost writes of several of a group's keys, each over a window of its
// own, leave a run of several axes: every pair of their times is a row.
// (Stepped a member at a time, three such writes with windows of 100 ms
// ran past a minute.) The check runs without a time limit.
func TestLostWritesOfSeveralKeysAreOneRun(t *testing.T) {
	const window = 10_000 // ms
	lost := func(c int, key string) Op {
		op := unknown(c, 1, t0, model.Input{Kind: model.Set, Key: key, Value: model.Int(1), TTLMillis: 1000})
		op.NowLatest = t0 + window
		return op
	}
	ttl := func(call, now int64, key string, out model.Output) Op {
		return do(4, call, call+1, now, model.Input{Kind: model.TTL, Key: key}, out)
	}
	lostDel := unknown(5, 2, t0, model.Input{Kind: model.Del, Keys: []string{"{g}a", "{g}b"}})
	lostDel.NowLatest = t0 + window
	history := func(del bool, reads ...Op) []Op {
		h := []Op{lost(0, "{g}a"), lost(1, "{g}b"), lost(2, "{g}c")}
		if del {
			h = append(h, lostDel)
		}
		for i := range 300 { // later calls step the run, not each of its members
			h = append(h, do(3, int64(4+2*i), int64(5+2*i), t0+int64(i), incr("{g}d"), model.Output{Int: int64(i + 1)}))
		}
		return append(h, reads...)
	}
	left := func(ms int64) model.Output { return model.Output{TTLMillis: ms} }
	gone := model.Output{Err: model.ErrNotFound}
	// Read together, each key's answer pins its own axis (readaxes.go):
	// stepped member by member, the box was 10,001^3 rows.
	ttls := func(call, now int64, a, b, c model.Output) Op {
		in := model.Input{Kind: model.Update}
		for _, k := range []string{"{g}a", "{g}b", "{g}c"} {
			in.Ops = append(in.Ops, model.Input{Kind: model.TTL, Key: k})
		}
		return do(4, call, call+1, now, in, model.Output{Sub: []model.Output{a, b, c}})
	}
	scan := func(call, now int64, a, b, c int64) Op {
		row := func(k string, at int64) model.KeyRow {
			return model.KeyRow{Key: k, Entry: model.Entry{Value: model.Int(1), ExpiresAt: at}}
		}
		return do(4, call, call+1, now, model.Input{Kind: model.Scan}, model.Output{Rows: []model.KeyRow{
			row("{g}a", now+a), row("{g}b", now+b), row("{g}c", now+c),
			{Key: "{g}d", Entry: model.Entry{Value: model.Int(300)}},
		}})
	}
	for _, c := range []checkCase{
		{name: "read together in one transaction", verdict: Ok, history: history(false,
			ttls(1000, t0+window/2, left(100), left(900), left(500)),
			ttls(1002, t0+window/2+50, left(50), left(850), left(450)),
		)},
		{name: "read together, one deadline no time of the window gives", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(false,
			ttls(1000, t0+window+5, left(100), left(1000), left(500)),
		)},
		{name: "read together, then again with one moved", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(false,
			ttls(1000, t0+window/2, left(100), left(900), left(500)),
			ttls(1002, t0+window/2+50, left(50), left(851), left(450)),
		)},
		{name: "scanned", verdict: Ok, history: history(false, scan(1000, t0+window/2, 100, 900, 500))},
		{name: "scanned, then read", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(false,
			scan(1000, t0+window/2, 100, 900, 500),
			ttls(1002, t0+window/2+50, left(50), left(850), left(451)),
		)},
		{name: "each written at a time of its own", verdict: Ok, history: history(false,
			ttl(1000, t0+window/2, "{g}a", left(100)), ttl(1002, t0+window/2, "{g}b", left(900)),
			ttl(1004, t0+window/2, "{g}c", left(500)),
		)},
		{name: "one not written", verdict: Ok, history: history(false,
			ttl(1000, t0+window/2, "{g}a", left(100)), ttl(1002, t0+window/2, "{g}b", gone),
			ttl(1004, t0+window/2, "{g}c", left(500)),
		)},
		{name: "a deadline no time of the window gives", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(false,
			ttl(1000, t0+window/2, "{g}a", left(100)),
			ttl(1002, t0+window+5, "{g}b", left(1000)), // ran at now: after the window
		)},
		// A lost delete of keys of two axes passes both through, less
		// what it deleted.
		{name: "and a lost delete of two of them", verdict: Ok, history: history(true,
			ttl(1000, t0+window/2, "{g}a", gone), ttl(1002, t0+window/2, "{g}b", left(900)),
			ttl(1004, t0+window/2, "{g}c", left(500)),
		)},
		{name: "and a lost delete, read after the window", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(true,
			ttl(1000, t0+window/2, "{g}a", gone),
			ttl(1002, t0+window+5, "{g}b", left(1000)),
		)},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.history, 0)
			require.NoError(t, res.Err)
			require.Equal(t, c.verdict, res.Verdict, "%s\n%s", res, res.Description)
			if c.verdict == Illegal {
				require.Equal(t, c.partition, res.Partition)
				require.Contains(t, res.Description, c.mentions)
			}
		})
	}
}

// A lost transaction that only writes keys of a box (a Del of one, a Set
// of another), as a server's death leaves the calls in flight on one
// group, writes them blind: whatever their deadlines were, it leaves one
// row per time of its window, and the box as it was if it did not run.
// Stepped a member of the box at a time, 1 s windows ran out of a minute
// (100 ms: 8 s). The check runs without a time limit.
func TestLostTransactionWritingKeysOfABox(t *testing.T) {
	const window = 3_000 // ms
	lost := func(c int, in model.Input) Op {
		op := unknown(c, 1, t0, in)
		op.NowLatest = t0 + window
		return op
	}
	history := func(reads ...Op) []Op {
		h := []Op{
			lost(0, model.Input{Kind: model.Set, Key: "{g}a", Value: model.Int(1), TTLMillis: 1000}),
			lost(1, model.Input{Kind: model.Set, Key: "{g}b", Value: model.Int(1), TTLMillis: 1000}),
			lost(2, model.Input{Kind: model.Update, Ops: []model.Input{
				{Kind: model.Del, Keys: []string{"{g}a"}},
				{Kind: model.Set, Key: "{g}b", Value: model.Int(2), TTLMillis: 5000},
			}}),
		}
		for i := range 100 {
			h = append(h, do(3, int64(4+2*i), int64(5+2*i), t0+int64(i), incr("{g}d"), model.Output{Int: int64(i + 1)}))
		}
		return append(h, reads...)
	}
	read := func(call, now int64, a, b model.Output) Op {
		return do(4, call, call+1, now, model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.Get, Key: "{g}a"}, {Kind: model.TTL, Key: "{g}b"},
		}}, model.Output{Sub: []model.Output{a, b}})
	}
	one, gone := model.Output{Value: model.Int(1)}, model.Output{Err: model.ErrNotFound}
	left := func(ms int64) model.Output { return model.Output{TTLMillis: ms} }
	for _, c := range []checkCase{
		{name: "it ran", verdict: Ok, history: history(read(1000, t0+window, gone, left(4000)))},
		{name: "it did not run", verdict: Ok, history: history(read(1000, t0+window/2, one, left(500)))},
		{name: "it ran, then the writes of the two keys it wrote", verdict: Ok, history: history(read(1000, t0+window+10, one, left(4990)))},
		{name: "a deadline it could not have set", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(
			read(1000, t0+window, gone, left(5001)),
		)},
		{name: "the value it set with the other write's deadline", verdict: Illegal, partition: "g:g", mentions: "ttl", history: history(
			do(4, 1000, 1001, t0+window, model.Input{Kind: model.Update, Ops: []model.Input{
				{Kind: model.Get, Key: "{g}b"}, {Kind: model.TTL, Key: "{g}b"},
			}}, model.Output{Sub: []model.Output{{Value: model.Int(2)}, left(800)}}),
		)},
		{name: "its value and deadline", verdict: Ok, history: history(
			do(4, 1000, 1001, t0+window, model.Input{Kind: model.Update, Ops: []model.Input{
				{Kind: model.Get, Key: "{g}b"}, {Kind: model.TTL, Key: "{g}b"},
			}}, model.Output{Sub: []model.Output{{Value: model.Int(2)}, left(2800)}}),
		)},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.history, 0)
			require.NoError(t, res.Err)
			require.Equal(t, c.verdict, res.Verdict, "%s\n%s", res, res.Description)
			if c.verdict == Illegal {
				require.Equal(t, c.partition, res.Partition)
				require.Contains(t, res.Description, c.mentions)
			}
		})
	}
}

// A step the search cannot finish in time ends the search: a lost write
// that reads a run's deadline (so keeps it) and sets another from its own
// time makes rows that vary in both, stepped one member of the run at a
// time, and a run and a window of a hundred million milliseconds each
// would take hours.
func TestSearchStopsInsideALongStep(t *testing.T) {
	lost := func(c int, read, write string) Op {
		op := unknown(c, 1, t0, model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.Get, Key: read},
			{Kind: model.Set, Key: write, Value: model.Int(1), TTLMillis: 1000},
		}})
		op.NowLatest = t0 + 100_000_000
		return op
	}
	res := Check([]Op{lost(0, "{g}b", "{g}a"), lost(1, "{g}a", "{g}b"), do(2, 2, 3, t0, get("{g}a"), notFound)}, 50*time.Millisecond)
	require.NoError(t, res.Err)
	require.Equal(t, Unknown, res.Verdict, "%s", res.Description)
	require.Contains(t, res.Description, "ran out of time")
}
