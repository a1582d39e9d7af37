package checks

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state"
)

// The shapes below are the engine's (state/flushturn.go, state/buffered.go):
// a background flush's dropped keys as "%w: %w" of the mark and its
// *state.FlushError, a failed one as "%w of DELTAS failed: %w", several
// joined, all under "PATH: flush: ". TestBackgroundFlushErrorsPastEightAreCounted
// (package state) splits the engine's own.

func droppedFlush(key string, delta int64) (LostFlush, error) {
	fe := &state.FlushError{Dropped: map[string]error{key: fmt.Errorf("delta %d dropped: %w", delta, state.ErrNotInteger)}}
	return LostFlush{Deltas: map[string]int64{key: delta}, Err: fe}, fmt.Errorf("%w: %w", state.ErrBackgroundFlush, fe)
}

func failedFlush(d map[string]int64, text string) (LostFlush, error) {
	cause := fmt.Errorf("disk I/O error: %w", state.ErrIO)
	return LostFlush{Deltas: d, Err: cause}, fmt.Errorf("%w of %s failed: %w", state.ErrBackgroundFlush, text, cause)
}

func named(err error) error { return fmt.Errorf("f.state: flush: %w", err) }

func TestSplitFlushErrorPartsBackgroundFromOwn(t *testing.T) {
	_, a := droppedFlush("a", 1)
	_, b := droppedFlush("b", 2)
	own := &state.FlushError{Dropped: map[string]error{"c": state.ErrOverflow}}
	bg, o := SplitFlushError(named(errors.Join(errors.Join(a, b), own)))
	assert.Equal(t, []error{a, b}, bg)
	assert.ErrorIs(t, o, own)
	assert.NotErrorIs(t, o, state.ErrBackgroundFlush)

	bg, o = SplitFlushError(named(fmt.Errorf("%w; also, 3 more background flushes failed", errors.Join(a, b))))
	assert.Equal(t, []error{a, b}, bg)
	assert.NoError(t, o)

	bg, o = SplitFlushError(named(own))
	assert.Empty(t, bg)
	assert.ErrorIs(t, o, own)
	bg, o = SplitFlushError(nil)
	assert.Empty(t, bg)
	assert.NoError(t, o)
}

// Every rule of FlushAnswer, each broken once: the background errors once
// each, in order, naming what they lost; those past MaxLostNamed counted;
// the call's own part its flush's outcome.
func TestFlushAnswerHoldsEachRule(t *testing.T) {
	la, a := droppedFlush("a", 1)
	lb, b := droppedFlush("b", 2)
	lf, f := failedFlush(map[string]int64{"n": 3, "m": -1}, `"m" -1, "n" +3`)
	fUnnamed := fmt.Errorf("%w of 2 keys failed: %w", state.ErrBackgroundFlush, lf.Err)
	ownFE := &state.FlushError{Dropped: map[string]error{"c": state.ErrOverflow}}
	busy := fmt.Errorf("database is locked: %w; the increments are kept for the next flush", state.ErrBusy)
	var many []LostFlush
	var manyErrs []error
	for i := range MaxLostNamed + 2 {
		l, e := droppedFlush(fmt.Sprintf("k%d", i), int64(i))
		many = append(many, l)
		if i < MaxLostNamed {
			manyErrs = append(manyErrs, e)
		}
	}
	manyErr := named(fmt.Errorf("%w; also, 2 more background flushes failed", errors.Join(manyErrs...)))

	for name, tc := range map[string]struct {
		err     error
		lost    []LostFlush
		own     OwnFlush
		isClose bool
		want    string // "" for none
	}{
		"nothing lost, nothing flushed":     {nil, nil, OwnFlush{}, false, ""},
		"nothing lost, flushed":             {nil, nil, OwnFlush{Ran: true}, false, ""},
		"one lost, returned":                {named(a), []LostFlush{la}, OwnFlush{}, false, ""},
		"one lost, not returned":            {nil, []LostFlush{la}, OwnFlush{}, false, "returned 0 background flush errors, but 1"},
		"returned again":                    {named(a), nil, OwnFlush{}, false, "returned 1 background flush errors, but 0"},
		"two lost, in order":                {named(errors.Join(a, f)), []LostFlush{la, lf}, OwnFlush{}, false, ""},
		"two lost, out of order":            {named(errors.Join(b, a)), []LostFlush{la, lb}, OwnFlush{}, false, "is not the one of the flush lost next"},
		"a failed flush not naming deltas":  {named(fUnnamed), []LostFlush{lf}, OwnFlush{}, false, `does not name "m" -1`},
		"past the named ones, counted":      {manyErr, many, OwnFlush{}, false, ""},
		"past the named ones, not counted":  {named(errors.Join(manyErrs...)), many, OwnFlush{}, false, "did not count the 2 background flush errors"},
		"counted, but none past":            {named(fmt.Errorf("%w; also, 1 more background flushes failed", a)), []LostFlush{la}, OwnFlush{}, false, "counted background flush errors past the 1 lost"},
		"own drop beside a lost one":        {named(errors.Join(a, ownFE)), []LostFlush{la}, OwnFlush{Ran: true, Err: ownFE}, false, ""},
		"own drop left out":                 {named(a), []LostFlush{la}, OwnFlush{Ran: true, Err: ownFE}, false, "returned <nil>"},
		"own flush kept its deltas":         {named(busy), nil, OwnFlush{Ran: true, Err: busy}, false, ""},
		"own flush wrote, an error anyway":  {named(busy), nil, OwnFlush{Ran: true}, false, "wrote every delta it took, but returned an error"},
		"a drop with no flush of its own":   {named(ownFE), nil, OwnFlush{}, false, "flushed nothing of its own, but says it dropped [c]"},
		"a handle that failed, no flush":    {named(fmt.Errorf("the handle failed earlier: %w", state.ErrIO)), nil, OwnFlush{}, false, ""},
		"Close's other trouble":             {named(busy), nil, OwnFlush{Ran: true}, true, ""},
		"Close says a drop its flush lacks": {named(ownFE), nil, OwnFlush{Ran: true}, true, "wrote every delta it took, but says it dropped [c]"},
		"Close returns the lost":            {named(errors.Join(a, busy)), []LostFlush{la}, OwnFlush{Ran: true}, true, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got := FlushAnswer(tc.err, tc.lost, tc.own, tc.isClose)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.NotEmpty(t, got)
			assert.Equal(t, KindFlushAnswer, got[0].Kind)
			assert.Contains(t, got[0].Detail, tc.want)
		})
	}
}
