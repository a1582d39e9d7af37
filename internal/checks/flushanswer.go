package checks

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/statekit/statekit/state"
)

// Flush answers: a background flush has no caller, so one that neither
// wrote all its deltas nor put them back into the buffer (a key dropped,
// the handle ended under it, an answer lost) leaves its error for the
// next Flush or Close of the handle, which returns it once, marked
// state.ErrBackgroundFlush, beside its own flush's outcome.

// MaxLostNamed is how many background flush errors one Flush or Close
// returns in full; those past it are counted ("also, N more background
// flushes failed").
const MaxLostNamed = 8

// LostFlush is a background flush whose error the next Flush or Close
// must return: what it took from the buffer and the error it ended with.
type LostFlush struct {
	Deltas map[string]int64
	Err    error
}

// OwnFlush is what a Flush's or Close's own flush did: Ran is false when
// it flushed nothing (nothing was buffered, or the handle had failed), Err
// is the error its flush ended with.
type OwnFlush struct {
	Ran bool
	Err error
}

// SplitFlushError parts what Flush or Close returned into the errors of
// earlier background flushes (each wrapping state.ErrBackgroundFlush and
// its own cause side by side), in the order returned, and what is left:
// the call's own error, nil when there is none.
func SplitFlushError(err error) (background []error, own error) {
	if !errors.Is(err, state.ErrBackgroundFlush) {
		return nil, err
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		j, ok := e.(interface{ Unwrap() []error })
		if !ok {
			continue
		}
		if slices.Contains(j.Unwrap(), state.ErrBackgroundFlush) {
			return []error{e}, nil // one background flush's error, and nothing of the call's
		}
		var rest []error
		for _, x := range j.Unwrap() {
			b, o := SplitFlushError(x)
			background = append(background, b...)
			if o != nil {
				rest = append(rest, o)
			}
		}
		return background, errors.Join(rest...)
	}
	return nil, nil
}

// FlushAnswer checks err, what a Flush (or, when isClose, a Close) of a
// handle returned, against the background flushes lost since the last
// Flush or Close of that handle (in the order they ended) and the call's
// own flush. The background errors must be there once each, in order,
// each wrapping its flush's error and naming its deltas (the first
// MaxLostNamed; the rest counted); the call's own part must be nil when
// its flush wrote everything (for Close: hold no *state.FlushError, as a
// Close may fail for other reasons), wrap its flush's error otherwise,
// and name no dropped key when it flushed nothing.
func FlushAnswer(err error, lost []LostFlush, own OwnFlush, isClose bool) []Violation {
	var out []Violation
	bad := func(format string, args ...any) {
		out = append(out, Violation{KindFlushAnswer, fmt.Sprintf(format, args...)})
	}
	verb := "Flush"
	if isClose {
		verb = "Close"
	}
	background, ownErr := SplitFlushError(err)
	named := min(len(lost), MaxLostNamed)
	if len(background) != named {
		bad("%s returned %d background flush errors, but %d background flushes lost deltas since the last Flush or Close (%s): %v",
			verb, len(background), len(lost), lostText(lost), err)
	}
	for i := range min(len(background), named) {
		if msg := lostViolation(background[i], lost[i]); msg != "" {
			bad("%s's background flush error %d of %d %s: %v", verb, i+1, named, msg, background[i])
		}
	}
	const more = "more background flushes failed"
	switch {
	case len(lost) > named && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d %s", len(lost)-named, more))):
		bad("%s did not count the %d background flush errors past the %d it names: %v", verb, len(lost)-named, named, err)
	case len(lost) <= named && err != nil && strings.Contains(err.Error(), more):
		bad("%s counted background flush errors past the %d lost: %v", verb, len(lost), err)
	}
	var fe *state.FlushError
	switch {
	case !own.Ran && errors.As(ownErr, &fe):
		bad("%s flushed nothing of its own, but says it dropped %v", verb, slices.Sorted(maps.Keys(fe.Dropped)))
	case own.Ran && own.Err == nil && !isClose && ownErr != nil:
		bad("%s wrote every delta it took, but returned an error of its own: %v", verb, ownErr)
	case own.Ran && own.Err == nil && errors.As(ownErr, &fe):
		bad("%s wrote every delta it took, but says it dropped %v", verb, slices.Sorted(maps.Keys(fe.Dropped)))
	case own.Ran && own.Err != nil && !errors.Is(ownErr, own.Err):
		bad("%s's flush ended with %q, but it returned %v", verb, own.Err, ownErr)
	}
	return out
}

// lostViolation says what is wrong with e as the error of the background
// flush l, or "" when it wraps l's error and names what l lost: its
// dropped keys, or, when the whole flush failed, its first deltas.
func lostViolation(e error, l LostFlush) string {
	if !errors.Is(e, l.Err) {
		return fmt.Sprintf("is not the one of the flush lost next (%v)", l.Err)
	}
	var fe *state.FlushError
	if errors.As(l.Err, &fe) {
		return "" // the FlushError itself, which names each dropped key
	}
	keys := slices.Sorted(maps.Keys(l.Deltas))
	for _, k := range keys[:min(len(keys), MaxLostNamed)] {
		if d := fmt.Sprintf("%q %+d", k, l.Deltas[k]); !strings.Contains(e.Error(), d) {
			return fmt.Sprintf("does not name %s", d)
		}
	}
	return ""
}

// lostText lists lost flushes' errors for a violation.
func lostText(lost []LostFlush) string {
	parts := make([]string, len(lost))
	for i, l := range lost {
		parts[i] = l.Err.Error()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
