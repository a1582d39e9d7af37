package ratelimit

import (
	"context"
	"errors"

	"github.com/statekit/statekit/state"
)

// guessWindow is the index of the window the handle's time falls in: the
// window a decision made now most likely counts in, read before its Update.
func guessWindow(db *state.DB, window int64) int64 {
	return db.Now().UnixNano() / window
}

// readWindows starts a window limiter's decision inside tx: it reads the
// counts of the windows first names (guessed from db.Now before the Update:
// nearly always the transaction's own window, and the one before it), then
// the transaction's time (decidedAt), and returns that time and count, which
// gives the count of any window by its index, read once.
//
// The keys come before the time because in a Redis Cluster a transaction
// has no time until it has touched a key: each master keeps its own clock,
// and the transaction's is its keys' master's. Asked for first, the time
// failed every decision there. A guess that names the wrong windows costs a
// read, never a wrong count: every count the decision uses is read by the
// transaction's time. A guessed window the decision does not use is not
// checked: what it holds is no error of this decision's.
func readWindows(ctx context.Context, tx *state.Tx, prefix, key string, first ...int64) (now int64, count func(idx int64) (int64, error), err error) {
	type read struct {
		idx, n int64
		err    error // ErrBadState, returned only if the decision uses it
	}
	var got []read
	for _, idx := range first {
		n, err := storedInt(tx, windowKey(prefix, key, idx))
		if err != nil && !errors.Is(err, ErrBadState) {
			return 0, nil, err
		}
		got = append(got, read{idx, n, err})
	}
	if now, err = decidedAt(ctx, tx); err != nil {
		return 0, nil, err
	}
	return now, func(idx int64) (int64, error) {
		for _, r := range got {
			if r.idx == idx {
				return r.n, r.err
			}
		}
		return storedInt(tx, windowKey(prefix, key, idx))
	}, nil
}
