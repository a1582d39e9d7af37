package checks

import (
	"context"
	"errors"

	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// ErrKind maps an error a verb of the engine returned to the error the
// model answers, model.ErrNone for nil. It reports false for every error
// the model has no kind for: an I/O error, a full disk, a busy or closed
// handle, a context that ended, corruption, a remote store that could not
// be reached or lost the reply (NotApplied and OutcomeUnknown tell those
// two apart), or anything unexpected. Such a
// call's outcome is unknown to the model; the caller must record it as
// unknown and report the error as a violation unless a fault it injected
// explains it, never accept it silently.
//
// A *state.FlushError is not one verb's answer and maps to false: map each
// of its Dropped errors instead.
func ErrKind(err error) (model.ErrKind, bool) {
	var fe *state.FlushError
	switch {
	case err == nil:
		return model.ErrNone, true
	case errors.As(err, &fe), outsideTheModel(err):
		return 0, false
	case errors.Is(err, state.ErrNotFound):
		return model.ErrNotFound, true
	case errors.Is(err, state.ErrNotInteger):
		return model.ErrNotInteger, true
	case errors.Is(err, state.ErrOverflow):
		return model.ErrOverflow, true
	case errors.Is(err, state.ErrLeaseHeld):
		return model.ErrLeaseHeld, true
	case errors.Is(err, state.ErrLeaseLost):
		return model.ErrLeaseLost, true
	case errors.Is(err, state.ErrInvalidKey), errors.Is(err, state.ErrInvalidValue),
		errors.Is(err, state.ErrInvalidTTL), errors.Is(err, state.ErrInvalidArgument):
		return model.ErrInvalid, true
	}
	return 0, false
}

// outsideTheModel reports whether err carries an error no verb answers in
// the model, whatever else it wraps: an I/O error that happens to wrap
// ErrNotFound is still an I/O error.
func outsideTheModel(err error) bool {
	for _, e := range []error{state.ErrIO, state.ErrDiskFull, state.ErrCorrupt, state.ErrBusy,
		state.ErrClosed, state.ErrReadOnly, state.ErrUnavailable, state.ErrOutcomeUnknown, state.ErrNotDurable,
		context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// NotApplied reports whether err says its verb was certainly not applied:
// it wraps state.ErrUnavailable (a remote store could not be reached, or
// refused the command before running it) and not state.ErrOutcomeUnknown.
// The model has no answer for it, and needs none: a recorder may leave
// such a call out of the history, as one that never ran.
func NotApplied(err error) bool {
	return errors.Is(err, state.ErrUnavailable) && !errors.Is(err, state.ErrOutcomeUnknown)
}

// OutcomeUnknown reports whether err says its verb may or may not have
// been applied: it wraps state.ErrOutcomeUnknown (the connection to a
// remote store failed after the command was sent). A recorder must keep
// such a call in the history as an unknown outcome, never as a failure.
func OutcomeUnknown(err error) bool { return errors.Is(err, state.ErrOutcomeUnknown) }
