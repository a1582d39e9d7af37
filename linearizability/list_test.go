package linearizability

import (
	"testing"
	"time"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func scan(prefix string, all bool) model.Input {
	return model.Input{Kind: model.Scan, Key: prefix, All: all}
}

func rows(rs ...model.KeyRow) model.Output { return model.Output{Rows: rs} }

func keyRow(k string, v model.Value, exp int64) model.KeyRow {
	return model.KeyRow{Key: k, Entry: model.Entry{Value: v, ExpiresAt: exp}}
}

func TestScanHistories(t *testing.T) {
	setTTL := model.Input{Kind: model.Set, Key: "b", Value: model.Int(2), TTLMillis: 10}
	runChecks(t, []checkCase{
		{name: "a scan lists what was written", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, setTTL, ok),
			do(1, 5, 6, t0, scan("", false), rows(keyRow("a", model.Int(1), 0), keyRow("b", model.Int(2), t0+10))),
		}},
		{name: "a key left out", verdict: Illegal, partition: "k:b", mentions: `scan("")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, setTTL, ok),
			do(1, 5, 6, t0, scan("", false), rows(keyRow("a", model.Int(1), 0))),
		}},
		{name: "a stale value", verdict: Illegal, partition: "k:a", mentions: `scan("")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("a", model.Int(2)), ok),
			do(1, 5, 6, t0, scan("", false), rows(keyRow("a", model.Int(1), 0))),
		}},
		{name: "a wrong deadline", verdict: Illegal, partition: "k:b", mentions: `scan("")`, history: []Op{
			do(0, 3, 4, t0, setTTL, ok),
			do(1, 5, 6, t0, scan("", false), rows(keyRow("b", model.Int(2), t0+11))),
		}},
		{name: "a key no call wrote", verdict: Illegal, partition: "k:z", mentions: `scan("")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(1, 5, 6, t0, scan("", false), rows(keyRow("a", model.Int(1), 0), keyRow("z", model.Int(1), 0))),
		}},
		{name: "a key outside the prefix", verdict: Illegal, partition: "k:b", mentions: `scan("a")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("b", model.Int(1)), ok),
			do(1, 5, 6, t0, scan("a", false), rows(keyRow("a", model.Int(1), 0), keyRow("b", model.Int(1), 0))),
		}},
		{name: "a prefix leaves the other keys unchecked", verdict: Ok, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 3, 4, t0, set("b", model.Int(1)), ok),
			do(1, 5, 6, t0, scan("a", false), rows(keyRow("a", model.Int(1), 0))),
		}},
		{name: "an expired key is not listed", verdict: Illegal, partition: "k:b", mentions: `scan("")`, history: []Op{
			do(0, 3, 4, t0, setTTL, ok),
			do(1, 5, 6, t0+10, scan("", false), rows(keyRow("b", model.Int(2), t0+10))),
		}},
		{name: "with all, an expired key is listed until swept", verdict: Ok, history: []Op{
			do(0, 3, 4, t0, setTTL, ok),
			do(1, 5, 6, t0+10, scan("", true), rows(keyRow("b", model.Int(2), t0+10))),
			do(0, 7, 8, t0+10, model.Input{Kind: model.Sweep}, model.Output{N: 1}),
			do(1, 9, 10, t0+10, scan("", true), rows()),
		}},
		{name: "with all, a swept key is not listed", verdict: Illegal, partition: "k:b", mentions: `scan("", all)`, history: []Op{
			do(0, 3, 4, t0, setTTL, ok),
			do(0, 7, 8, t0+10, model.Input{Kind: model.Sweep}, model.Output{N: 1}),
			do(1, 9, 10, t0+10, scan("", true), rows(keyRow("b", model.Int(2), t0+10))),
		}},
		{name: "each key at its own moment: a scan is not a snapshot", verdict: Ok, history: []Op{
			// Within the scan a is read before the writes, b after:
			// allowed key by key, though no one moment has a=0, b=1.
			do(0, 1, 2, t0, set("a", model.Int(0)), ok),
			do(0, 3, 4, t0, set("b", model.Int(0)), ok),
			do(2, 5, 20, t0, scan("", false), rows(keyRow("a", model.Int(0), 0), keyRow("b", model.Int(1), 0))),
			do(0, 6, 7, t0, set("a", model.Int(1)), ok),
			do(0, 8, 9, t0, set("b", model.Int(1)), ok),
		}},
		{name: "a NORMAL commit a power loss took back is not listed after it", verdict: Illegal, partition: "k:a", mentions: `scan("")`, history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			PowerLossAt(5),
			do(0, 10, 11, t0+1, get("a"), notFound),
			do(1, 12, 13, t0+1, scan("", false), rows(keyRow("a", model.Int(1), 0))),
		}},
	})
}

func TestLeaseListHistories(t *testing.T) {
	list := func(all bool) model.Input { return model.Input{Kind: model.Leases, All: all} }
	held := func(name, owner string, tok, exp int64) model.Output {
		return model.Output{Leases: []model.NamedLease{{Name: name, LeaseRow: model.LeaseRow{Owner: owner, Token: tok, ExpiresAt: exp}}}}
	}
	runChecks(t, []checkCase{
		{name: "the holder and its token", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o"), token(1, t0+100))),
			do(1, 3, 4, t0+5, list(false), held("l", "o", 1, t0+100)),
			do(1, 5, 6, t0+100, list(false), model.Output{}),
			do(1, 7, 8, t0+100, list(true), held("l", "o", 1, t0+100)),
		}},
		{name: "a wrong token", verdict: Illegal, partition: "l:l", mentions: "leases()", history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o"), token(1, t0+100))),
			do(1, 3, 4, t0+5, list(false), held("l", "o", 2, t0+100)),
		}},
		{name: "an expired lease listed as held", verdict: Illegal, partition: "l:l", mentions: "leases()", history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o"), token(1, t0+100))),
			do(1, 3, 4, t0+100, list(false), held("l", "o", 1, t0+100)),
		}},
		{name: "a prefix leaves the other leases unchecked", verdict: Ok, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o"), token(1, t0+100))),
			full(do(0, 3, 4, t0, lease("m", "o"), token(1, t0+100))),
			do(1, 5, 6, t0+5, model.Input{Kind: model.Leases, Key: "m"}, held("m", "o", 1, t0+100)),
		}},
		{name: "a lease outside the prefix", verdict: Illegal, partition: "l:l", mentions: `leases("m")`, history: []Op{
			full(do(0, 1, 2, t0, lease("l", "o"), token(1, t0+100))),
			do(1, 5, 6, t0+5, model.Input{Kind: model.Leases, Key: "m"}, held("l", "o", 1, t0+100)),
		}},
		{name: "a key is not a lease", verdict: Illegal, partition: "l:a", mentions: "leases(all)", history: []Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(1, 3, 4, t0, list(true), held("a", "o", 1, t0+100)),
		}},
	})
}

func TestListingsOutOfOrderAreIllegal(t *testing.T) {
	for _, out := range []model.Output{
		rows(keyRow("b", model.Int(1), 0), keyRow("a", model.Int(1), 0)),
		rows(keyRow("a", model.Int(1), 0), keyRow("a", model.Int(1), 0)),
		{Leases: []model.NamedLease{{Name: "m"}, {Name: "l"}}},
	} {
		res := Check([]Op{
			do(0, 1, 2, t0, set("a", model.Int(1)), ok),
			do(0, 1, 2, t0, set("b", model.Int(1)), ok),
			do(1, 3, 4, t0, model.Input{Kind: model.Scan, All: len(out.Leases) == 0}, out),
		}, time.Second)
		require.NoError(t, res.Err)
		assert.Equal(t, Illegal, res.Verdict, "%s", out)
		assert.Contains(t, res.Description, "row 1 is not after the one before")
	}
}

func TestLostListingsAreLeftOut(t *testing.T) {
	res := Check([]Op{
		do(0, 1, 2, t0, set("a", model.Int(1)), ok),
		unknown(1, 3, t0, scan("", false)),
		unknown(1, 4, t0, model.Input{Kind: model.Leases}),
	}, time.Second)
	require.True(t, res.Ok(), "%s", res)
	assert.Equal(t, 1, res.Partitions, "a lost listing adds no partition")
}
