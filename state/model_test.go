package state_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/drive"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// machine drives the engine and the model side by side.
type machine struct {
	t       *testing.T
	b       backend
	path    string
	clock   *faults.Clock
	db      *state.DB
	spec    model.State
	leases  []model.Input // every lease ever granted: Renew/Release pick among them, stale or not
	pending map[string]int64
	opts    []state.Option
}

var (
	modelKeys   = []string{"a", "b", "c"}
	modelLeases = []string{"job", "cron"}
	modelOwners = []string{"w1", "w2"}
)

func genValue(t *rapid.T, label string) model.Value {
	if rapid.Bool().Draw(t, label+"IsInt") {
		return model.Int(rapid.SampledFrom([]int64{0, 1, -1, 7, 42, math.MaxInt64, math.MinInt64}).Draw(t, label))
	}
	return model.Bytes(rapid.SampledFrom([]string{"", "x", "7", "hello"}).Draw(t, label))
}

func genTTL(t *rapid.T, label string) int64 {
	return rapid.SampledFrom([]int64{0, 0, 1, 5, 50, 1000}).Draw(t, label)
}

// genVerb draws one verb that Update may contain.
func (m *machine) genVerb(t *rapid.T) model.Input {
	key := rapid.SampledFrom(modelKeys).Draw(t, "key")
	switch rapid.IntRange(0, 10).Draw(t, "verb") {
	case 0:
		return model.Input{Kind: model.Get, Key: key}
	case 1:
		return model.Input{Kind: model.Set, Key: key, Value: genValue(t, "value"), TTLMillis: genTTL(t, "ttl")}
	case 2:
		keys := rapid.SliceOfN(rapid.SampledFrom(modelKeys), 1, 3).Draw(t, "keys")
		return model.Input{Kind: model.Del, Keys: keys}
	case 3:
		delta := rapid.SampledFrom([]int64{1, -1, 5, math.MaxInt64, math.MinInt64}).Draw(t, "delta")
		return model.Input{Kind: model.IncrBy, Key: key, Delta: delta, TTLMillis: genTTL(t, "ttl")}
	case 4:
		in := model.Input{Kind: model.CAS, Key: key}
		switch rapid.IntRange(0, 2).Draw(t, "expected") {
		case 1:
			in.Expected = model.Ptr(genValue(t, "expected"))
		case 2: // the key's value in the other type, where CAS must not swap
			in.Expected = model.Ptr(m.twin(t, key))
		}
		if rapid.Bool().Draw(t, "newSet") {
			in.New = model.Ptr(genValue(t, "new"))
		}
		in.TTLMillis = genTTL(t, "ttl") // with a nil new: invalid in both
		return in
	case 5:
		return model.Input{Kind: model.Expire, Key: key, TTLMillis: rapid.SampledFrom([]int64{-1, 0, 1, 20, 1000}).Draw(t, "ttl")}
	case 6:
		return model.Input{Kind: model.TTL, Key: key}
	case 7, 8:
		return model.Input{Kind: model.Lease, Key: rapid.SampledFrom(modelLeases).Draw(t, "lease"),
			Owner: rapid.SampledFrom(modelOwners).Draw(t, "owner"), TTLMillis: rapid.SampledFrom([]int64{1, 30, 1000}).Draw(t, "ttl")}
	default:
		if len(m.leases) == 0 {
			return model.Input{Kind: model.Get, Key: key}
		}
		l := m.leases[len(m.leases)-1] // the latest grant, usually still held
		if rapid.Bool().Draw(t, "stale") {
			l = rapid.SampledFrom(m.leases).Draw(t, "held")
		}
		kind := rapid.SampledFrom([]model.Kind{model.Renew, model.Release}).Draw(t, "leaseVerb")
		return model.Input{Kind: kind, Key: l.Key, Owner: l.Owner, Token: l.Token, TTLMillis: 100}
	}
}

// step runs in on both sides and fails on any difference.
func (m *machine) step(t *rapid.T, in model.Input) {
	in.NowMillis = m.db.Now().UnixMilli()
	next, want := model.Step(m.spec, in)
	got := drive.Run(context.Background(), m.db, in)
	if got.Err != nil {
		t.Fatalf("%s: engine error %v", in, got.Err)
	}
	if !model.Matches(in, want, got.Out) {
		t.Fatalf("%s\n engine: %s\n model:  %s", in, model.Describe(in, got.Out), model.Describe(in, want))
	}
	m.spec = next
	m.noteLeases(in, want)
}

// twin returns key's live value in the model in the other type, the
// same text: int 7 for bytes "7", bytes "7" for int 7; a drawn value when
// there is none.
func (m *machine) twin(t *rapid.T, key string) model.Value {
	_, out := model.Step(m.spec, model.Input{Kind: model.Get, Key: key, NowMillis: m.db.Now().UnixMilli()})
	v := out.Value
	switch n, err := strconv.ParseInt(v.Bytes, 10, 64); {
	case out.Err != model.ErrNone:
		return genValue(t, "expected")
	case v.IsInt:
		return model.Bytes(strconv.FormatInt(v.Int, 10))
	case err == nil:
		return model.Int(n)
	}
	return genValue(t, "expected")
}

// noteLeases remembers granted leases for later Renew and Release.
func (m *machine) noteLeases(in model.Input, out model.Output) {
	if out.Err != model.ErrNone {
		return
	}
	if in.Kind == model.Lease {
		m.leases = append(m.leases, model.Input{Key: in.Key, Owner: in.Owner, Token: out.Token})
	}
	for i, op := range in.Ops {
		if in.Kind == model.Update && i < len(out.Sub) {
			m.noteLeases(op, out.Sub[i])
		}
	}
}

// flush writes the pending buffered increments on both sides.
func (m *machine) flush(t *rapid.T, close bool) {
	in := model.Input{Kind: model.Flush}
	for _, k := range slices.Sorted(maps.Keys(m.pending)) {
		in.Ops = append(in.Ops, model.Input{Kind: model.IncrBy, Key: k, Delta: m.pending[k]})
	}
	in.NowMillis = m.db.Now().UnixMilli()
	m.pending = map[string]int64{}
	if close {
		require.NoError(t, ignoreFlushError(m.db.Close()))
	} else {
		require.NoError(t, ignoreFlushError(m.db.Flush(context.Background())))
	}
	m.spec, _ = model.Step(m.spec, in)
}

func ignoreFlushError(err error) error {
	var fe *state.FlushError
	if err != nil && !errors.As(err, &fe) {
		return err
	}
	return nil
}

// check compares every key and lease the model knows with the engine.
func (m *machine) check(t *rapid.T) {
	for _, k := range modelKeys {
		m.step(t, model.Input{Kind: model.Get, Key: k})
		m.step(t, model.Input{Kind: model.TTL, Key: k})
	}
}

func TestEngineAgreesWithModel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		rapid.Check(t, modelProperty(t, b))
	})
}

// TestModelTestCatchesPlantedBugs proves the model test can fail: with each
// planted bug it can see, it must report a difference.
func TestModelTestCatchesPlantedBugs(t *testing.T) {
	// A canary only needs to fail; shrinking its failure would take rapid's
	// default 30 s each.
	shrink := flag.Lookup("rapid.shrinktime")
	old := shrink.Value.String()
	require.NoError(t, shrink.Value.Set("10ms"))
	t.Cleanup(func() { _ = shrink.Value.Set(old) })
	// A canary stops at its first failure, so many checks cost nothing
	// when it is caught; with rapid's default 100, a rare shape (CAS of
	// int 7 against bytes "7" without a TTL) once went unseen in a run.
	checks := flag.Lookup("rapid.checks")
	oldChecks := checks.Value.String()
	require.NoError(t, checks.Value.Set("2000"))
	t.Cleanup(func() { _ = checks.Value.Set(oldChecks) })
	for _, bug := range []bugs.Bug{bugs.ReadIgnoresDeadline, bugs.CASIgnoresType, bugs.RenewBumpsToken,
		bugs.ReleaseDeletes, bugs.SweepEarly, bugs.IncrTwoStatements, bugs.ScanIgnoresDeadline} {
		t.Run(bug.String(), func(t *testing.T) {
			rec := &failRecorder{TB: t, name: "canary-" + bug.String()}
			rapid.Check(rec, modelProperty(t, backends[0], planted(bugs.Set{}.With(bug))))
			require.True(t, rec.failed, "the model test did not notice %s", bug)
			// Caught by the comparison with the model, not by something
			// else going wrong (an engine error, a failed Open).
			assert.Contains(t, strings.Join(rec.msgs, "\n"), "\n model:  ", "the failure was not a difference from the model:\n%s", strings.Join(rec.msgs, "\n"))
		})
	}
}

// failRecorder is a rapid.TB that records a failure, and what it said,
// instead of failing.
type failRecorder struct {
	testing.TB
	name   string
	failed bool
	msgs   []string
}

func (r *failRecorder) fail(msg string) { r.failed = true; r.msgs = append(r.msgs, msg) }

func (r *failRecorder) Name() string                   { return r.name }
func (r *failRecorder) Errorf(format string, a ...any) { r.fail(fmt.Sprintf(format, a...)) }
func (r *failRecorder) Error(a ...any)                 { r.fail(fmt.Sprint(a...)) }
func (r *failRecorder) Fatalf(format string, a ...any) { r.fail(fmt.Sprintf(format, a...)) }
func (r *failRecorder) Fatal(a ...any)                 { r.fail(fmt.Sprint(a...)) }
func (r *failRecorder) Fail()                          { r.failed = true }
func (r *failRecorder) FailNow()                       { r.failed = true }
func (r *failRecorder) Failed() bool                   { return r.failed }
func (r *failRecorder) Logf(string, ...any)            {}
func (r *failRecorder) Log(...any)                     {}

// modelProperty is the model-based property over backend b.
func modelProperty(t *testing.T, b backend, opts ...state.Option) func(*rapid.T) {
	run := 0
	return func(rt *rapid.T) {
		run++
		m := &machine{t: t, b: b, path: filepath.Join(t.TempDir(), fmt.Sprintf("m%d.state", run)),
			clock: newClock(), spec: model.NewState(), pending: map[string]int64{}, opts: opts}
		m.db = m.open(rt)
		defer func() { _ = m.db.Close() }()
		rt.Repeat(map[string]func(*rapid.T){
			"verb": func(rt *rapid.T) { m.step(rt, m.genVerb(rt)) },
			"update": func(rt *rapid.T) {
				in := model.Input{Kind: model.Update, Abort: rapid.Bool().Draw(rt, "abort")}
				for i := rapid.IntRange(1, 4).Draw(rt, "ops"); i > 0; i-- {
					in.Ops = append(in.Ops, m.genVerb(rt))
				}
				m.step(rt, in)
			},
			"sweep": func(rt *rapid.T) { m.step(rt, model.Input{Kind: model.Sweep}) },
			"scan": func(rt *rapid.T) {
				m.step(rt, model.Input{Kind: model.Scan, Key: rapid.SampledFrom([]string{"", "a", "c", "z"}).Draw(rt, "prefix"),
					All: rapid.Bool().Draw(rt, "all")})
			},
			"leases": func(rt *rapid.T) { m.step(rt, model.Input{Kind: model.Leases, All: rapid.Bool().Draw(rt, "all")}) },
			"leaseCycle": func(rt *rapid.T) {
				// grant, renew, release, grant again: where token bugs show
				name := rapid.SampledFrom(modelLeases).Draw(rt, "lease")
				owner := rapid.SampledFrom(modelOwners).Draw(rt, "owner")
				m.step(rt, model.Input{Kind: model.Lease, Key: name, Owner: owner, TTLMillis: 1000})
				if n := len(m.leases); n > 0 && m.leases[n-1].Key == name {
					l := m.leases[n-1]
					m.step(rt, model.Input{Kind: model.Renew, Key: l.Key, Owner: l.Owner, Token: l.Token, TTLMillis: 1000})
					m.step(rt, model.Input{Kind: model.Release, Key: l.Key, Owner: l.Owner, Token: l.Token})
				}
				m.step(rt, model.Input{Kind: model.Lease, Key: name, Owner: "w3", TTLMillis: 1000})
			},
			"buffer": func(rt *rapid.T) {
				k := rapid.SampledFrom(modelKeys).Draw(rt, "key")
				d := rapid.Int64Range(-3, 3).Draw(rt, "delta")
				require.NoError(rt, m.db.IncrBuffered(k, d))
				m.pending[k] += d
			},
			"flush": func(rt *rapid.T) { m.flush(rt, false) },
			"advance": func(rt *rapid.T) {
				m.clock.Advance(time.Duration(rapid.SampledFrom([]int{1, 5, 30, 700}).Draw(rt, "ms")) * time.Millisecond)
			},
			"stepWall": func(rt *rapid.T) {
				m.clock.StepWall(time.Duration(rapid.IntRange(-3600, 3600).Draw(rt, "s")) * time.Second)
			},
			"reopen": func(rt *rapid.T) {
				m.flush(rt, true)
				m.clock = m.clock.Restart()
				m.db = m.open(rt)
			},
			"": func(rt *rapid.T) { m.check(rt) },
		})
	}
}

func (m *machine) open(t *rapid.T) *state.DB {
	opts := append([]state.Option{state.WithClock(m.clock), state.WithoutBackground()}, m.b.opts(m.t)...)
	opts = append(opts, m.opts...)
	db, err := state.Open(m.path, opts...)
	require.NoError(t, err)
	return db
}
