package stress

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// incr is a recorded +1 on counter n0 of epoch 0.
func incr(client int, answer int64, unknown bool) linearizability.Op {
	return linearizability.Op{Client: client, Unknown: unknown,
		Input:  model.Input{Kind: model.IncrBy, Key: "e0/n0", Delta: 1},
		Output: model.Output{Int: answer}}
}

func TestCounterKeysIn(t *testing.T) {
	history := []linearizability.Op{incr(1, 1, false), incr(1, 2, false),
		{Input: model.Input{Kind: model.IncrBy, Key: "e3/a", Delta: 1}},
		{Input: model.Input{Kind: model.IncrBy, Key: "e3/n1", Delta: 1}},
		{Input: model.Input{Kind: model.Flush, Ops: []model.Input{{Kind: model.IncrBy, Key: "e4/n0", Delta: 2}}}}}
	assert.Equal(t, []string{"e0/n0", "e3/n1", "e4/n0"}, counterKeysIn(history))
}

func TestEpochsOf(t *testing.T) {
	for _, tc := range []struct {
		in     model.Input
		epochs []int64
	}{
		{model.Input{Kind: model.Get, Key: "e12/a"}, []int64{12}},
		{model.Input{Kind: model.Del, Keys: []string{"e3/a", "e3/b"}}, []int64{3}},
		{model.Input{Kind: model.Update, Ops: []model.Input{{Kind: model.Set, Key: "e0/c"}}}, []int64{0}},
		{model.Input{Kind: model.Lease, Key: "e7/L0"}, []int64{7}},
		{model.Input{Kind: model.Flush, Ops: []model.Input{{Kind: model.IncrBy, Key: "e5/a"}, {Kind: model.IncrBy, Key: "e4/n0"}}}, []int64{4, 5}},
		{model.Input{Kind: model.Sweep}, nil},
		{model.Input{Kind: model.Get, Key: "a"}, nil},
	} {
		assert.Equal(t, tc.epochs, epochsOf(tc.in), "%s", tc.in)
	}
}

func TestInEpochSplitsFlushesAndSweeps(t *testing.T) {
	flush := linearizability.Op{Client: 1,
		Input: model.Input{Kind: model.Flush, Ops: []model.Input{
			{Kind: model.IncrBy, Key: "e4/n0", Delta: 1}, {Kind: model.IncrBy, Key: "e5/a", Delta: 2}, {Kind: model.IncrBy, Key: "e5/n1", Delta: 3}}},
		Output: model.Output{Sub: []model.Output{{}, {Err: model.ErrNotInteger}, {}}}}
	got, ok := inEpoch(flush, 5)
	require.True(t, ok)
	assert.Equal(t, []model.Input{{Kind: model.IncrBy, Key: "e5/a", Delta: 2}, {Kind: model.IncrBy, Key: "e5/n1", Delta: 3}}, got.Input.Ops)
	assert.Equal(t, []model.Output{{Err: model.ErrNotInteger}, {}}, got.Output.Sub)
	assert.Len(t, flush.Input.Ops, 3, "the history's op is left as it was")
	_, ok = inEpoch(flush, 6)
	assert.False(t, ok)

	swept := linearizability.Op{Client: 2, Input: model.Input{Kind: model.Del, Keys: []string{"e0/c", "e1/a", "e1/t0"}}}
	got, ok = inEpoch(swept, 0)
	require.True(t, ok)
	assert.Equal(t, []string{"e0/c"}, got.Input.Keys)
	assert.Zero(t, got.Output.N)
	allLive := swept
	allLive.Output.N = 3
	got, _ = inEpoch(allLive, 1)
	assert.Equal(t, []string{"e1/a", "e1/t0"}, got.Input.Keys)
	assert.Equal(t, 2, got.Output.N, "every key was live: so were this epoch's")
	someLive := swept
	someLive.Output.N = 1
	got, _ = inEpoch(someLive, 1)
	assert.Equal(t, someLive, got, "which keys were live is not known: whole")
	repeated := linearizability.Op{Client: 2, Input: model.Input{Kind: model.Del, Keys: []string{"e1/a", "e1/a", "e2/b"}},
		Output: model.Output{N: 2}}
	got, _ = inEpoch(repeated, 1)
	assert.Equal(t, []string{"e1/a", "e1/a"}, got.Input.Keys)
	assert.Equal(t, 1, got.Output.N, "a key named twice counts once")

	sweep := linearizability.Op{Input: model.Input{Kind: model.Sweep}}
	got, ok = inEpoch(sweep, 9)
	assert.True(t, ok)
	assert.Equal(t, sweep, got)
	get := linearizability.Op{Input: model.Input{Kind: model.Get, Key: "e3/a"}}
	_, ok = inEpoch(get, 2)
	assert.False(t, ok)
	got, ok = inEpoch(get, 3)
	assert.True(t, ok)
	assert.Equal(t, get, got)
}

// A listing of one epoch's prefix (what the reader makes) is that epoch's;
// one whose prefix names no epoch lists every epoch's rows, and each epoch
// gets its own.
func TestInEpochSplitsListings(t *testing.T) {
	row := func(k string) model.KeyRow { return model.KeyRow{Key: k, Entry: model.Entry{Value: model.Int(1)}} }
	lease := func(n string) model.NamedLease {
		return model.NamedLease{Name: n, LeaseRow: model.LeaseRow{Owner: "o", Token: 1}}
	}
	epochs := linearizability.Op{Input: model.Input{Kind: model.Leases, Key: "e2/"},
		Output: model.Output{Leases: []model.NamedLease{lease("e2/L0")}}}
	_, ok := inEpoch(epochs, 1)
	assert.False(t, ok)
	got, ok := inEpoch(epochs, 2)
	require.True(t, ok)
	assert.Equal(t, epochs, got)

	every := linearizability.Op{Input: model.Input{Kind: model.Scan, All: true},
		Output: model.Output{Rows: []model.KeyRow{row("e1/a"), row("e2/a"), row("e2/n0"), row("x")}}}
	got, ok = inEpoch(every, 2)
	require.True(t, ok)
	assert.Equal(t, []model.KeyRow{row("e2/a"), row("e2/n0")}, got.Output.Rows)
	assert.Len(t, every.Output.Rows, 4, "the history's op is left as it was")
	leases := linearizability.Op{Input: model.Input{Kind: model.Leases},
		Output: model.Output{Leases: []model.NamedLease{lease("e1/L0"), lease("e1/L1"), lease("e3/L0")}}}
	got, _ = inEpoch(leases, 1)
	assert.Equal(t, []model.NamedLease{lease("e1/L0"), lease("e1/L1")}, got.Output.Leases)
	got, _ = inEpoch(leases, 2)
	assert.Empty(t, got.Output.Leases)
}

// leaseCallOp is a recorded Lease call of lease L; token 0 is a refusal.
func leaseCallOp(client int, seq, token, call, ret int64) linearizability.Op {
	op := linearizability.Op{Client: client, Seq: seq, Call: call, Return: ret, Durability: linearizability.Full,
		Input:  model.Input{Kind: model.Lease, Key: "e0/L", Owner: "o", TTLMillis: 100},
		Output: model.Output{Token: token}}
	if token == 0 {
		op.Output = model.Output{Err: model.ErrLeaseHeld}
	}
	return op
}

func TestWorkCountsGrantsOverlappingAnotherProcess(t *testing.T) {
	procOf := func(client int) int { return client / 10 } // clients 10-19 are process 1, ...
	noSweeper := func(int) bool { return false }
	c := newWorkCount(procOf, noSweeper)
	for _, op := range []linearizability.Op{
		leaseCallOp(10, 1, 1, 0, 10),
		leaseCallOp(11, 1, 0, 5, 8),   // same process: not contended
		leaseCallOp(20, 1, 0, 9, 12),  // another process, refused: the first grant counts
		leaseCallOp(21, 1, 2, 11, 20), // overlaps only 20, of its own process
		leaseCallOp(30, 1, 3, 19, 25), // overlaps 21's grant: both count
		leaseCallOp(30, 2, 4, 40, 50), // alone
		{Client: 31, Seq: 1, Call: 41, Return: 49, Input: model.Input{Kind: model.Update, Ops: []model.Input{
			{Kind: model.Lease, Key: "e0/L", Owner: "p", TTLMillis: 100}}}, Output: model.Output{Sub: []model.Output{{Token: 5}}}},
	} {
		c.add(op)
	}
	assert.Equal(t, 5, c.grants, "four grants alone and one inside an Update")
	assert.Equal(t, 3, c.contended, "the first grant, 21's and 30's first")

	// Fed in another order (journals read at different moments), the same.
	c2 := newWorkCount(procOf, noSweeper)
	c2.add(leaseCallOp(30, 1, 3, 19, 25))
	c2.add(leaseCallOp(20, 1, 0, 9, 12))
	c2.add(leaseCallOp(21, 1, 2, 11, 20))
	c2.add(leaseCallOp(10, 1, 1, 0, 10))
	assert.Equal(t, 3, c2.contended)
}

func TestWorkCountsSweptKeys(t *testing.T) {
	sweeper := func(client int) bool { return client == 19 }
	c := newWorkCount(func(client int) int { return client / 10 }, sweeper)
	del := func(client int, keys ...string) linearizability.Op {
		return linearizability.Op{Client: client, Input: model.Input{Kind: model.Del, Keys: keys}}
	}
	c.add(del(19, "e0/a", "e0/b")) // a sweep statement that deleted two keys
	c.add(del(19))                 // one that deleted none
	c.add(del(11, "e0/c"))         // a Del verb
	c.add(linearizability.Op{Client: 12, Input: model.Input{Kind: model.Sweep}, Output: model.Output{N: 3}})
	c.add(linearizability.Op{Client: 12, Input: model.Input{Kind: model.Sweep}, Unknown: true})
	c.add(linearizability.Op{Client: 12, Input: model.Input{Kind: model.Sweep}})
	assert.Equal(t, 5, c.swept)
	assert.Equal(t, 2, c.sweeps)
	assert.Zero(t, c.grants)
}

func TestTailReadsCompletedLinesOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	tl := tail{path: path}
	var got []linearizability.Op
	collect := func(op linearizability.Op) { got = append(got, op) }
	require.NoError(t, tl.read(collect), "no journal yet")
	assert.Empty(t, got)

	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	grant := leaseCallOp(1, 1, 1, 0, 10)
	require.NoError(t, linearizability.Encode(f, grant, incr(1, 1, false)))
	sweep := linearizability.Op{Client: 9, Input: model.Input{Kind: model.Del, Keys: []string{"e0/a"}}}
	line, err := os.ReadFile(path)
	require.NoError(t, err)
	_, err = f.Write(line[:20]) // the start of the grant again, not yet complete
	require.NoError(t, err)
	require.NoError(t, tl.read(collect))
	assert.Equal(t, []linearizability.Op{grant}, got, "only lines that may grant a lease or sweep, and only complete ones")

	_, err = f.Write(line[20:])
	require.NoError(t, err)
	require.NoError(t, linearizability.Encode(f, sweep))
	require.NoError(t, tl.read(collect))
	assert.Equal(t, []linearizability.Op{grant, grant, sweep}, got)
	tl.close()
}

func TestReadNotesIgnoresACutLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.jsonl")
	j, err := openJournal(filepath.Join(t.TempDir(), "ops"), path)
	require.NoError(t, err)
	require.NoError(t, j.note(note{Kind: noteBuffered, Client: 3, Key: "e0/n0", Delta: 2}))
	require.NoError(t, j.note(note{Kind: noteError, Client: 3, Seq: 7, Op: "get", Err: "boom"}))
	require.NoError(t, j.close())
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"kind":"buff`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	notes, err := readNotes(path)
	require.NoError(t, err)
	assert.Equal(t, []note{{Kind: noteBuffered, Client: 3, Key: "e0/n0", Delta: 2}, {Kind: noteError, Client: 3, Seq: 7, Op: "get", Err: "boom"}}, notes)
	none, err := readNotes(filepath.Join(t.TempDir(), "missing"))
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestFlushOpsAreInKeyOrder(t *testing.T) {
	assert.Equal(t, []model.Input{{Kind: model.IncrBy, Key: "a", Delta: 1}, {Kind: model.IncrBy, Key: "b", Delta: 0}, {Kind: model.IncrBy, Key: "c", Delta: 3}},
		flushOps(map[string]int64{"c": 3, "a": 1, "b": 0}))
}

func TestWorkCovers(t *testing.T) {
	want := Work{Calls: 10, Kills: 2, Grants: 3, Contended: 1}
	assert.True(t, Work{Calls: 10, Kills: 2, Grants: 3, Contended: 1}.covers(want))
	assert.True(t, Work{Calls: 99, Kills: 9, Grants: 9, Contended: 9}.covers(want))
	assert.False(t, Work{Calls: 99, Kills: 9, Grants: 9}.covers(want), "no contended grant")
	assert.False(t, Work{Calls: 9, Kills: 9, Grants: 9, Contended: 9}.covers(want), "too few calls")
	assert.True(t, Work{}.covers(Work{}))
	assert.False(t, Work{Calls: 99, Kills: 9, Grants: 9, Contended: 9}.covers(Work{Swept: 1}), "no swept key")
	assert.Equal(t, "10 calls, 2 kills, 3 grants, 1 contended grants, 0 swept keys", want.String())
}

func TestReportListsEachViolationOnce(t *testing.T) {
	var r Report
	for i := 0; i < 3; i++ {
		r.violate(KindCounter, "same")
	}
	for i := 0; i < maxViolationsPerKind+5; i++ {
		r.violate(KindFence, "write %d", i)
	}
	assert.Len(t, r.Violations, 1+maxViolationsPerKind)
	assert.Equal(t, 5, r.Dropped)
	assert.Equal(t, "FAIL", r.Verdict())
}

// TestLinearizabilityCheckReachesEveryEpoch: the check takes the history
// one epoch at a time, and every epoch counts. A read in the last epoch of
// a value no call wrote is found, named by its epoch; the verdict of a
// clean history counts every epoch it checked.
func TestLinearizabilityCheckReachesEveryEpoch(t *testing.T) {
	history := func(lastRead int64) []linearizability.Op {
		var ops []linearizability.Op
		for e := range int64(3) {
			key := "e" + string(rune('0'+e)) + "/a"
			read := int64(1)
			if e == 2 {
				read = lastRead
			}
			ops = append(ops,
				linearizability.Op{Client: 1, Seq: 2*e + 1, Call: 100 * e, Return: 100*e + 10,
					Input: model.Input{Kind: model.Set, Key: key, Value: model.Int(1)}},
				linearizability.Op{Client: 1, Seq: 2*e + 2, Call: 100*e + 20, Return: 100*e + 30,
					Input: model.Input{Kind: model.Get, Key: key}, Output: model.Output{Value: model.Int(read)}})
		}
		return ops
	}
	check := func(ops []linearizability.Op) *Report {
		d := &driver{cfg: Config{Dir: t.TempDir(), CheckTimeout: DefaultCheckTimeout}, report: &Report{}}
		d.checkLinearizable(ops)
		return d.report
	}

	r := check(history(1))
	assert.True(t, r.OK(), "%v", r.Violations)
	assert.Contains(t, r.Linearizability, "Ok (3 partitions, 6 operations, 3 epochs)")

	r = check(history(7))
	assert.True(t, r.Has(KindLinearizability), "a read of 7 in epoch 2, where only 1 was written: %v", r.Violations)
	assert.Contains(t, r.Linearizability, "in epoch 2")
}

// TestEveryNotedErrorIsAViolation: a worker notes each error the model has
// no answer for (I/O, busy, a closed handle) and the check reports each,
// with its call and its text, as an engine error. On a file no outage is
// injected, so a call refused or whose reply was lost is one too.
func TestEveryNotedErrorIsAViolation(t *testing.T) {
	d := &driver{report: &Report{}, procs: []*proc{{cfg: workerConfig{Client: 1, Goroutines: 1}}},
		notes: [][]note{{
			{Kind: noteError, Client: 1, Seq: 7, Op: "get", Err: "disk I/O error"},
			{Kind: noteUncertain, Client: 1, Seq: 8, Op: "set", Err: "lost"},
			{Kind: noteRefused, Client: 2, Seq: 9, Op: "del", Err: "refused"},
		}}}
	require.NoError(t, d.checkNotes(nil))
	var details []string
	for _, v := range d.report.Violations {
		if v.Kind == KindEngineError {
			details = append(details, v.Detail)
		}
	}
	assert.Equal(t, []string{"c1 #7 get: disk I/O error", "c1 #8 set: lost", "c2 #9 del: refused"}, details)
}

// Only a key "e<n>/..." is of an epoch: the workload's keys all are, and a
// key of no epoch (another program's, a listing's bare prefix) is checked
// beside every epoch, not taken for one.
func TestEpochOfKeyReadsOnlyAnEpochsPrefix(t *testing.T) {
	for key, want := range map[string]int64{"e3/a": 3, "e0/{g}a": 0, "e12/": 12} {
		e, ok := epochOfKey(key)
		assert.True(t, ok, key)
		assert.Equal(t, want, e, key)
	}
	for _, key := range []string{"x3/a", "e/a", "e3x/a", "a", "3/a", "E3/a"} {
		_, ok := epochOfKey(key)
		assert.False(t, ok, key)
	}
}
