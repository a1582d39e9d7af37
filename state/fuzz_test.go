package state_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/drive"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fuzz targets. Plain go test replays their seeds (f.Add and
// testdata/fuzz/<Target>/); go test -fuzz <Target> ./state explores.

// fuzzT0 is the wall time the fuzz targets' clocks start at.
var fuzzT0 = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// openFuzzDB opens a native file shared by every input of one fuzz run.
func openFuzzDB(f *testing.F, clock state.Clock) *state.DB {
	f.Helper()
	db, err := state.Open(filepath.Join(f.TempDir(), "fuzz.state"), state.WithClock(clock), state.WithoutBackground())
	require.NoError(f, err)
	f.Cleanup(func() { db.Close() })
	return db
}

// repeatTo repeats s times times, but not much past limit bytes.
func repeatTo(s string, times, limit int) string {
	if s == "" {
		return ""
	}
	return strings.Repeat(s, max(1, min(times, limit/len(s)+1)))
}

// keyIsValid is the documented rule for keys and lease names.
func keyIsValid(k string) bool {
	return k != "" && len(k) <= state.MaxKeyBytes && utf8.ValidString(k) && strings.IndexByte(k, 0) < 0
}

// FuzzSetGetRoundTrip: a key and a value of any bytes and any size
// round-trip through Set and Get exactly, or Set refuses them with
// ErrInvalidKey or ErrInvalidValue and writes nothing.
func FuzzSetGetRoundTrip(f *testing.F) {
	f.Add("key", uint16(1), []byte("value"), uint32(1), false, false, int64(0))
	f.Add("k", uint16(1), []byte{}, uint32(1), false, false, int64(0))
	f.Add("k", uint16(1), []byte("7"), uint32(1), true, false, int64(0))
	f.Add("k", uint16(1), []byte(nil), uint32(1), false, true, int64(math.MinInt64))
	f.Add("", uint16(1), []byte("v"), uint32(1), false, false, int64(0))
	f.Add("nul\x00key", uint16(1), []byte("v"), uint32(1), false, false, int64(0))
	f.Add("\xff\xfe", uint16(1), []byte("v"), uint32(1), false, false, int64(0))
	f.Add("ключ🔑", uint16(1), []byte("\x00\xff\x00"), uint32(1), false, false, int64(0))
	f.Add("k", uint16(state.MaxKeyBytes), []byte("v"), uint32(1), false, false, int64(0))   // exactly the limit
	f.Add("k", uint16(state.MaxKeyBytes+1), []byte("v"), uint32(1), false, false, int64(0)) // one over
	f.Add("big", uint16(1), []byte("0123456789abcdef"), uint32(state.MaxValueBytes/16), false, false, int64(0))
	f.Add("big", uint16(1), []byte("0123456789abcdef"), uint32(state.MaxValueBytes/16+1), true, false, int64(0))
	clock := faults.NewClock(fuzzT0)
	db := openFuzzDB(f, clock)
	f.Fuzz(func(t *testing.T, key string, keyRepeat uint16, value []byte, valueRepeat uint32, asString, isInt bool, n int64) {
		ctx := context.Background()
		k := repeatTo(key, int(keyRepeat), 2*state.MaxKeyBytes)
		v := []byte(repeatTo(string(value), int(valueRepeat), state.MaxValueBytes+1024))
		var arg any = v
		switch {
		case isInt:
			arg = n
		case asString:
			arg = string(v)
		}
		if !keyIsValid(k) {
			err := db.Set(ctx, k, arg)
			require.ErrorIs(t, err, state.ErrInvalidKey)
			_, err = db.Get(ctx, k)
			require.ErrorIs(t, err, state.ErrInvalidKey)
			return
		}
		_, err := db.Del(ctx, k)
		require.NoError(t, err)
		err = db.Set(ctx, k, arg)
		if !isInt && len(v) > state.MaxValueBytes {
			require.ErrorIs(t, err, state.ErrInvalidValue)
			_, err = db.Get(ctx, k)
			require.ErrorIs(t, err, state.ErrNotFound, "a refused Set writes nothing")
			return
		}
		require.NoError(t, err)
		got, err := db.Get(ctx, k)
		require.NoError(t, err)
		if isInt {
			i, ok := got.Int()
			require.True(t, ok, "an integer stays an integer")
			require.Equal(t, n, i)
		} else {
			require.False(t, got.IsInt(), "bytes are never parsed as a number")
			require.True(t, bytes.Equal(v, got.Bytes()), "%d bytes in, %d out", len(v), len(got.Bytes()))
		}
		swapped, err := db.CAS(ctx, k, arg, arg)
		require.NoError(t, err)
		require.True(t, swapped, "a value equals itself")
		found := false
		require.NoError(t, db.Scan(ctx, k, false, func(ki state.KeyInfo) error {
			found = found || ki.Key == k
			return nil
		}))
		require.True(t, found, "Scan with the key as prefix finds it")
	})
}

// FuzzLeaseNamesAndOwners: a lease name and an owner of any bytes either
// round-trip (the holder is reported exactly, the token only grows) or are
// refused with a clear error.
func FuzzLeaseNamesAndOwners(f *testing.F) {
	f.Add("job", "worker-1", int64(1000))
	f.Add("job", "", int64(1000))
	f.Add("", "w", int64(1000))
	f.Add("job", "w", int64(0))
	f.Add("job", "w", int64(-5))
	f.Add("job", "nul\x00owner", int64(1))
	f.Add("job", "\xff\xfe not utf-8", int64(1))
	f.Add("cron\x00", "w", int64(1))
	f.Add("job", strings.Repeat("o", state.MaxKeyBytes+1), int64(1))
	clock := faults.NewClock(fuzzT0)
	db := openFuzzDB(f, clock)
	tokens := map[string]int64{}
	f.Fuzz(func(t *testing.T, name, owner string, ttlMillis int64) {
		ctx := context.Background()
		ttl := time.Duration(ttlMillis%(24*3600*1000)) * time.Millisecond
		l, err := db.Lease(ctx, name, owner, ttl)
		switch {
		case !keyIsValid(name):
			require.ErrorIs(t, err, state.ErrInvalidKey)
			return
		case owner == "" || len(owner) > state.MaxKeyBytes:
			require.ErrorIs(t, err, state.ErrInvalidArgument)
			return
		case ttl <= 0:
			require.ErrorIs(t, err, state.ErrInvalidTTL)
			return
		}
		require.NoError(t, err)
		require.Equal(t, owner, l.Owner)
		require.Greater(t, l.Token, tokens[name], "a new grant gets a higher token")
		tokens[name] = l.Token

		other := "other"
		if owner == other {
			other = "another"
		}
		_, err = db.Lease(ctx, name, other, ttl)
		var held *state.LeaseHeldError
		require.ErrorAs(t, err, &held)
		require.Equal(t, owner, held.Owner, "the holder is reported exactly")
		again, err := db.Lease(ctx, name, owner, ttl)
		require.NoError(t, err)
		require.Equal(t, l.Token, again.Token, "the same owner extends its lease")

		seen := false
		require.NoError(t, db.Leases(ctx, false, func(li state.LeaseInfo) error {
			if li.Name == name {
				seen = true
				assert.Equal(t, owner, li.Owner)
				assert.Equal(t, l.Token, li.Token)
			}
			return nil
		}))
		require.True(t, seen)
		require.NoError(t, db.Renew(ctx, l, ttl))
		require.NoError(t, db.Release(ctx, l))
		require.ErrorIs(t, db.Release(ctx, l), state.ErrLeaseLost)
	})
}

// fuzzBytes reads a fuzz input as a stream of small decisions; past its
// end it reads zeros.
type fuzzBytes struct{ b []byte }

func (r *fuzzBytes) empty() bool { return len(r.b) == 0 }

func (r *fuzzBytes) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzBytes) i64() int64 {
	var buf [8]byte
	n := copy(buf[:], r.b)
	r.b = r.b[n:]
	return int64(binary.LittleEndian.Uint64(buf[:]))
}

// small returns a number that is mostly small, sometimes any int64.
func (r *fuzzBytes) small() int64 {
	switch c := r.u8(); {
	case c < 200:
		return int64(c%16) - 4
	case c < 230:
		return r.i64()
	case c < 245:
		return math.MaxInt64 - int64(c%4)
	default:
		return math.MinInt64 + int64(c%4)
	}
}

func (r *fuzzBytes) str(max int) string {
	n := int(r.u8()) % (max + 1)
	n = min(n, len(r.b))
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

var (
	fuzzKeys   = []string{"a", "b", "c", ""}
	fuzzLeases = []string{"job", "cron", ""}
	fuzzOwners = []string{"w1", "w2", ""}
)

func (r *fuzzBytes) pick(from []string) string { return from[int(r.u8())%len(from)] }

func (r *fuzzBytes) value() model.Value {
	if r.u8()%2 == 0 {
		return model.Int(r.small())
	}
	return model.Bytes(r.str(16))
}

// ttl returns a TTL in milliseconds: mostly none or short, sometimes any
// that a time.Duration can hold.
func (r *fuzzBytes) ttl() int64 {
	switch c := r.u8(); {
	case c < 100:
		return 0
	case c < 230:
		return int64(c % 50)
	default:
		return r.i64() % (math.MaxInt64 / int64(time.Millisecond))
	}
}

func (r *fuzzBytes) owner() string {
	if r.u8() < 240 {
		return r.pick(fuzzOwners)
	}
	return r.str(8) // any bytes: NUL, invalid UTF-8
}

// input decodes one verb; granted are leases seen granted, for Renew and
// Release to pick from (stale or not).
func (r *fuzzBytes) input(granted []model.Input, inTx bool) model.Input {
	verbs := 14
	if inTx {
		verbs = 11
	}
	key := r.pick(fuzzKeys)
	switch r.u8() % uint8(verbs) {
	case 0:
		return model.Input{Kind: model.Get, Key: key}
	case 1:
		return model.Input{Kind: model.Set, Key: key, Value: r.value(), TTLMillis: r.ttl()}
	case 2:
		keys := []string{key}
		for n := r.u8() % 3; n > 0; n-- {
			keys = append(keys, r.pick(fuzzKeys))
		}
		return model.Input{Kind: model.Del, Keys: keys}
	case 3:
		return model.Input{Kind: model.IncrBy, Key: key, Delta: r.small(), TTLMillis: r.ttl()}
	case 4:
		in := model.Input{Kind: model.CAS, Key: key}
		if r.u8()%3 > 0 {
			in.Expected = model.Ptr(r.value())
		}
		if r.u8()%4 > 0 {
			in.New = model.Ptr(r.value())
		}
		return in
	case 5:
		ttl := r.ttl()
		if r.u8()%4 == 0 {
			ttl = -ttl
		}
		return model.Input{Kind: model.Expire, Key: key, TTLMillis: ttl}
	case 6:
		return model.Input{Kind: model.TTL, Key: key}
	case 7, 8:
		return model.Input{Kind: model.Lease, Key: r.pick(fuzzLeases), Owner: r.owner(), TTLMillis: r.ttl() - 2}
	case 9, 10:
		kind := model.Renew
		if r.u8()%2 == 0 {
			kind = model.Release
		}
		in := model.Input{Kind: kind, Key: r.pick(fuzzLeases), Owner: r.owner(), Token: r.small(), TTLMillis: r.ttl() - 2}
		if len(granted) > 0 && r.u8()%4 > 0 {
			g := granted[int(r.u8())%len(granted)]
			in.Key, in.Owner, in.Token = g.Key, g.Owner, g.Token
		}
		return in
	case 11:
		in := model.Input{Kind: model.Update, Abort: r.u8()%8 == 0}
		for n := 1 + r.u8()%4; n > 0; n-- {
			in.Ops = append(in.Ops, r.input(granted, true))
		}
		return in
	case 12:
		// Distinct keys: the buffer sums deltas per key, the model applies
		// each on its own.
		in := model.Input{Kind: model.Flush}
		for i, k := range fuzzKeys[:3] {
			if r.u8()%2 == 0 || (i == 2 && len(in.Ops) == 0) {
				in.Ops = append(in.Ops, model.Input{Kind: model.IncrBy, Key: k, Delta: r.small()})
			}
		}
		return in
	}
	return model.Input{Kind: model.Sweep}
}

// fuzzSteps bounds one input's verbs.
const fuzzSteps = 64

// FuzzVerbSequence: any sequence of verbs, with any values, deltas, TTLs,
// tokens and owners, never panics, and the engine answers every one as the
// model does.
func FuzzVerbSequence(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 1, 0, 7, 1, 0, 3})
	f.Add([]byte("\x00\x01\x01\x00\x01\x07\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00"))
	f.Add(bytes.Repeat([]byte{3, 7, 1, 2, 250, 9}, 20))    // increments near overflow
	f.Add(bytes.Repeat([]byte{0, 7, 0, 0, 1, 150, 9}, 12)) // leases with short TTLs
	f.Add(bytes.Repeat([]byte{0, 11, 0, 4, 3, 1, 0, 1, 9, 1, 0, 1, 7, 12, 0, 2}, 8))
	f.Fuzz(func(t *testing.T, prog []byte) {
		ctx := context.Background()
		clock := faults.NewClock(fuzzT0)
		db, err := state.Open("fuzz.state", state.WithFS(faults.NewMemFS(1).Process(1)), state.WithClock(clock), state.WithoutBackground())
		require.NoError(t, err)
		defer db.Close()
		spec := model.NewState()
		var granted []model.Input
		r := &fuzzBytes{b: prog}
		for step := 0; step < fuzzSteps && !r.empty(); step++ {
			clock.Advance([]time.Duration{0, 0, time.Millisecond, 7 * time.Millisecond, 50 * time.Millisecond, time.Second}[r.u8()%6])
			in := r.input(granted, false)
			in.NowMillis = db.Now().UnixMilli()
			next, want := model.Step(spec, in)
			got := drive.Run(ctx, db, in)
			require.NoError(t, got.Err, "step %d: %s", step, in)
			require.True(t, matches(in, want, got.Out), "step %d: %s\n engine: %s\n model:  %s",
				step, in, model.Describe(in, got.Out), model.Describe(in, want))
			spec = next
			if in.Kind == model.Lease && want.Err == model.ErrNone {
				granted = append(granted, model.Input{Key: in.Key, Owner: in.Owner, Token: want.Token})
			}
		}
		findings, err := db.Check(ctx)
		require.NoError(t, err)
		require.Empty(t, findings)
	})
}

// matches is model.Matches, except that a Flush reports only which keys
// failed, not their new values.
func matches(in model.Input, want, got model.Output) bool {
	if in.Kind != model.Flush {
		return model.Matches(in, want, got)
	}
	if want.Err != got.Err || len(want.Sub) != len(got.Sub) {
		return false
	}
	for i := range want.Sub {
		if want.Sub[i].Err != got.Sub[i].Err {
			return false
		}
	}
	return true
}

// corruptRun bounds how long one corrupted file may take to open, check
// and use: past it, the engine hangs.
const corruptRun = 20 * time.Second

// FuzzOpenCorrupted: Open on a damaged file (truncated, bytes changed in
// the header, in pages, in the WAL, or a WAL from another file) returns an
// error or a database, never panics or hangs; a failed Open leaves the
// file and its WAL byte for byte as they were; on an opened file every
// call either works or fails with a sentinel error, and damage that makes
// a call fail is ErrCorrupt naming the file.
func FuzzOpenCorrupted(f *testing.F) {
	for _, seed := range corruptSeeds {
		f.Add(seed)
	}
	fx := newCorruptFixture(f)
	f.Fuzz(func(t *testing.T, prog []byte) {
		c := fx.damage(prog)
		dir := t.TempDir()
		path := c.write(t, dir)
		done := make(chan struct{})
		var panicked any
		go func() {
			defer close(done)
			defer func() { panicked = recover() }()
			useCorrupted(t, c, path)
		}()
		select {
		case <-done:
		case <-time.After(corruptRun):
			t.Fatalf("open, check and use of %s did not finish within %v: %s", path, corruptRun, c.describe())
		}
		require.Nil(t, panicked, "panic on %s", c.describe())
	})
}

// sentinels are every error a call on a damaged file may wrap.
// (A header whose write version SQLite does not know opens read-only:
// writes fail with ErrReadOnly.)
var sentinels = []error{state.ErrCorrupt, state.ErrNotStatekit, state.ErrSchemaTooNew, state.ErrNotFound,
	state.ErrNotInteger, state.ErrOverflow, state.ErrLeaseHeld, state.ErrIO, state.ErrReadOnly}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// useCorrupted opens path (damaged as c says), and checks what the fuzz
// target promises. It reports failures with assert, since it runs off the
// test's goroutine.
func useCorrupted(t *testing.T, c corrupted, path string) {
	ctx := context.Background()
	db, err := state.Open(path, state.WithoutBackground())
	if err != nil {
		assert.True(t, isSentinel(err), "open %s: unclassified error %v", c.describe(), err)
		assert.Contains(t, err.Error(), path, "the error names the file")
		if !c.assertUntouched(t, path) {
			t.Logf("the open that failed: %v", err)
		}
		return
	}
	defer db.Close()
	var calls []error
	_, cerr := db.Check(ctx)
	calls = append(calls, cerr)
	_, err = db.Get(ctx, "key-1-30")
	calls = append(calls, err)
	_, err = db.Get(ctx, "key-1-39")
	calls = append(calls, err)
	_, err = db.Incr(ctx, "n1")
	calls = append(calls, err)
	calls = append(calls, db.Set(ctx, "fresh", "value"))
	_, err = db.Lease(ctx, "job", "beta", time.Minute)
	calls = append(calls, err)
	calls = append(calls, db.Scan(ctx, "", true, func(state.KeyInfo) error { return nil }))
	for i, err := range calls {
		if err == nil {
			continue
		}
		assert.True(t, isSentinel(err), "call %d on %s: unclassified error %v", i, c.describe(), err)
		if errors.Is(err, state.ErrCorrupt) {
			assert.Contains(t, err.Error(), path, "call %d: ErrCorrupt names the file", i)
		}
	}
}
