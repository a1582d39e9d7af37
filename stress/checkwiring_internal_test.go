package stress

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckRunsEveryCheck: the driver's check, run on a recorded run made
// by hand, reports what each of its checks exists to see, each planted
// alone beside a clean run: a counter the file holds past its increments,
// an audit that read half a transfer, a token granted to two owners, a
// fenced write under a token its holder was never granted, a process that
// ran at a time before one an earlier process had used, a process whose
// engine time ran ahead of its monotonic clock, a damaged row in
// the file, a buffered increment no flush took, an engine error a worker
// noted, a call refused while nothing was down. Linearizability may see some of them too; the check that exists
// for each must. The same on a Redis run, but for the drift of a process's
// clock, which a run on the server's clock does not check. A stress run with the engine's planted bugs seldom meets
// a bug that only one of these sees before another check does, so without
// this test a check left out of the driver would pass every run.
func TestCheckRunsEveryCheck(t *testing.T) {
	cases := []struct {
		plant string
		kind  string // "" for the clean run
		file  bool   // only a run on a file has this check
	}{
		{"", "", false},
		{"counter", KindCounter, false},
		{"audit", KindAtomicity, false},
		{"token", KindDuplicateToken, false},
		{"fence", KindFence, false},
		{"clock", KindClock, false},
		{"clock drift", KindClock, true},
		{"integrity", KindIntegrity, false},
		{"buffered", KindBuffered, false},
		{"engine error", KindEngineError, false},
		{"refused while up", KindEngineError, false},
	}
	for _, store := range []string{"file", "redis"} {
		t.Run(store, func(t *testing.T) {
			var srv *redistest.Server
			if store == "redis" {
				srv = redistest.Start(t)
			}
			for i, c := range cases {
				if c.file && srv != nil {
					continue
				}
				name := c.plant
				if name == "" {
					name = "clean"
				}
				t.Run(name, func(t *testing.T) {
					r := checkHandMadeRun(t, c.plant, srv, fmt.Sprintf("w%d:", i))
					if c.kind == "" {
						assert.Empty(t, r.Violations, "the clean run")
						assert.Contains(t, r.Linearizability, string(linearizability.Ok), "checked")
						assert.Positive(t, r.Fenced, "the fenced write was checked")
						return
					}
					kinds := make([]string, len(r.Violations))
					for i, v := range r.Violations {
						kinds[i] = v.Kind
					}
					assert.Contains(t, kinds, c.kind, "%v", r.Violations)
				})
			}
		})
	}
}

// checkHandMadeRun writes a run's record as the workers and the driver
// would (a state file, or keys under prefix on srv, the fenced resource,
// two workers' journals and notes), with plant's inconsistency in it, runs
// the driver's check, and returns its report.
func checkHandMadeRun(t *testing.T, plant string, srv *redistest.Server, prefix string) *Report {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	d := &driver{cfg: Config{Dir: dir, Log: io.Discard, CheckTimeout: DefaultCheckTimeout},
		path: filepath.Join(dir, "state.db"), resource: filepath.Join(dir, "resource.db"), report: &Report{}}
	if srv != nil {
		d.redis = &redisRun{url: srv.URL(prefix), prefix: prefix}
		d.path = d.redis.url
	}

	// Worker c1 (clients 1-3) runs first, worker c4 (clients 4-6) after
	// it has exited. Times: engine ms 1000+k at CLOCK_MONOTONIC k ms.
	s := model.NewState()
	at := func(ms int64) int64 { return (ms - 1000) * 1_000_000 }
	var ops [2][]linearizability.Op
	seq := int64(0)
	call := func(w, client int, in model.Input) model.Output {
		var out model.Output
		s, out = model.Step(s, in)
		seq++
		ops[w] = append(ops[w], linearizability.Op{Client: client, Seq: seq, Input: in, Output: out,
			Call: at(in.NowMillis) + 100, Return: at(in.NowMillis) + 200})
		return out
	}
	call(0, 1, model.Input{Kind: model.IncrBy, Key: "e0/n0", Delta: 1, NowMillis: 1001})
	call(0, 1, model.Input{Kind: model.Update, NowMillis: 1002, Ops: []model.Input{
		{Kind: model.IncrBy, Key: "e0/xa", Delta: -2}, {Kind: model.IncrBy, Key: "e0/xb", Delta: 2}}})
	audit := model.Input{Kind: model.Update, NowMillis: 1003, Ops: []model.Input{{Kind: model.Get, Key: "e0/xa"}, {Kind: model.Get, Key: "e0/xb"}}}
	if plant == "audit" {
		ops[0] = append(ops[0], linearizability.Op{Client: 1, Seq: 99, Input: audit, Call: at(1003) + 100, Return: at(1003) + 200,
			Output: model.Output{Sub: []model.Output{{Value: model.Int(-2)}, {Err: model.ErrNotFound}}}})
	} else {
		call(0, 1, audit)
	}
	grant := call(0, 1, model.Input{Kind: model.Lease, Key: "e0/L0", Owner: "c1", TTLMillis: 100, NowMillis: 1004})
	require.Equal(t, int64(1), grant.Token)
	if plant == "token" {
		ops[0] = append(ops[0], linearizability.Op{Client: 1, Seq: 98, Call: at(1200) + 100, Return: at(1200) + 200,
			Input:  model.Input{Kind: model.Lease, Key: "e0/L0", Owner: "c1b", TTLMillis: 100, NowMillis: 1200},
			Output: model.Output{Token: 1, ExpiresAt: 1300}})
	}
	call(1, 4, model.Input{Kind: model.Get, Key: "e0/a", NowMillis: 2000})
	if plant == "clock" {
		// Its one call at 900, before times c1 used, though c1 had exited.
		ops[1][0].Input.NowMillis = 900
	}
	if plant == "clock drift" {
		// 300 ms of engine time in 10 ms of the process's monotonic clock.
		ops[1] = append(ops[1], linearizability.Op{Client: 4, Seq: 97, Call: at(2010) + 100, Return: at(2010) + 200,
			Input: model.Input{Kind: model.Get, Key: "e0/b", NowMillis: 2310}, Output: model.Output{Err: model.ErrNotFound}})
	}

	procs := []*proc{
		{cfg: workerConfig{Client: 1, Goroutines: 1}, launched: 0, endNanos: at(1500)},
		{cfg: workerConfig{Client: 4, Goroutines: 1}, launched: at(1600), endNanos: at(2500)},
	}
	for i, p := range procs {
		p.index = i
		p.cfg.Journal = filepath.Join(dir, p.name()+".journal")
		p.cfg.Notes = filepath.Join(dir, p.name()+".notes")
		j, err := openJournal(p.cfg.Journal, p.cfg.Notes)
		require.NoError(t, err)
		for _, op := range ops[i] {
			require.NoError(t, j.op(op))
		}
		if i == 0 && plant == "buffered" {
			require.NoError(t, j.note(note{Kind: noteBuffered, Client: 1, Key: "e0/a", Delta: 3}))
		}
		if i == 1 && plant == "refused while up" {
			// On a file nothing is refused; on Redis no outage explains it.
			require.NoError(t, j.note(note{Kind: noteRefused, Client: 4, Seq: 51, Op: "set", Err: "connection refused",
				Call: at(2001), Return: at(2002)}))
		}
		if i == 1 && plant == "engine error" {
			require.NoError(t, j.note(note{Kind: noteError, Client: 4, Seq: 50, Op: "get", Err: "disk I/O error"}))
		}
		require.NoError(t, j.close())
	}
	d.procs = procs

	res, err := openResource(d.resource)
	require.NoError(t, err)
	holder := "c1"
	if plant == "fence" {
		holder = "c9" // granted nothing
	}
	accepted, err := res.write(ctx, "e0/L0", grant.Token, holder)
	require.NoError(t, err)
	require.True(t, accepted)
	require.NoError(t, res.close())

	// The store as the workers left it.
	db, err := state.Open(d.path, state.WithoutBackground())
	require.NoError(t, err)
	final := s.KV["e0/n0"].Value.Int
	if plant == "counter" {
		final += 5
	}
	require.NoError(t, db.Set(ctx, "e0/n0", final))
	require.NoError(t, db.Close())
	switch {
	case plant == "integrity" && srv != nil:
		_, err := srv.Command("SET", prefix+"k:e0/c", "i:007") // not the canonical form of 7
		require.NoError(t, err)
	case plant == "integrity":
		raw, err := sql.Open("sqlite", d.path)
		require.NoError(t, err)
		_, err = raw.Exec(`INSERT INTO leases(name, owner, token, expires_at) VALUES ('e0/L1', '', 1, 0)`)
		require.NoError(t, err)
		require.NoError(t, raw.Close())
	}

	require.NoError(t, d.check(ctx))
	return d.report
}
