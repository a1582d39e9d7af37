package linearizability

import (
	"bytes"
	"strings"
	"testing"

	"github.com/statekit/statekit/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJournalRoundTrip(t *testing.T) {
	ops := []Op{
		full(do(3, 1, 2, t0, lease("l", "o\xff"), token(1, t0+100))),
		do(4, 2, 5, t0, model.Input{Kind: model.Update, Ops: []model.Input{set("a", model.Bytes("\x00\xfe")), get("b")}},
			model.Output{Sub: []model.Output{{}, notFound}}),
		unknown(3, 6, t0+1, incr("c")),
		PowerLossAt(7),
		DurableWithin(8, 9),
	}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, ops...))
	assert.Equal(t, len(ops), strings.Count(buf.String(), "\n"), "one line per op")
	back, err := Decode(&buf)
	require.NoError(t, err)
	assert.Equal(t, ops, back)
}

func TestJournalLaterLineReplacesPending(t *testing.T) {
	pendingA := unknown(1, 10, t0, incr("a"))
	pendingA.Seq = 1
	doneA := do(1, 10, 12, t0, incr("a"), n(1))
	doneA.Seq = 1
	pendingB := unknown(1, 13, t0, incr("a"))
	pendingB.Seq = 2
	other := do(2, 11, 14, t0, get("a"), val(model.Int(1))) // Seq 0: never replaced
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, pendingA, other, doneA, pendingB, other))
	buf.WriteString(`{"client":1,"seq":2,"input":{"kind":"incrby","key":"a","delta":1,"now_ms":1000000},"output":{"err":"none","int":2},"call":13,"ret`)

	got, err := Decode(&buf)
	require.NoError(t, err)
	assert.Equal(t, []Op{doneA, other, pendingB, other}, got, "the cut last line is ignored; seq 1 resolved in place")
}

func TestJournalErrors(t *testing.T) {
	_, err := Decode(strings.NewReader("{\"client\":1}\nnot json\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2")
	_, err = Decode(strings.NewReader(`{"input":{"kind":"nope"}}` + "\n"))
	require.Error(t, err)
	_, err = Decode(strings.NewReader(`{"event":"eclipse"}` + "\n"))
	require.Error(t, err)
	_, err = Decode(strings.NewReader(strings.Repeat(" ", MaxLineBytes+1) + "\n"))
	require.Error(t, err)
	ops, err := Decode(strings.NewReader("\n\n"))
	require.NoError(t, err)
	assert.Empty(t, ops)
}

func TestMergeAndCheckProcesses(t *testing.T) {
	// Two processes journal their own calls; the merged history is checked.
	p1 := []Op{do(10, 1, 4, t0, incr("c"), n(1)), do(10, 9, 10, t0+1, incr("c"), n(3))}
	p2 := []Op{do(20, 2, 3, t0, get("c"), notFound), do(20, 5, 8, t0, incr("c"), n(2))}
	merged := Merge(p1, p2)
	calls := make([]int64, len(merged))
	for i, op := range merged {
		calls[i] = op.Call
	}
	assert.Equal(t, []int64{1, 2, 5, 9}, calls)
	assert.True(t, Check(merged, 0).Ok())

	p2[1].Output.Int = 1 // a lost update across processes
	res := Check(Merge(p1, p2), 0)
	assert.Equal(t, Illegal, res.Verdict)
	assert.Contains(t, res.Description, "c20")
}
