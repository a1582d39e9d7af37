package state_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTxAfterUpdateRefusesEveryVerb keeps the Tx of an Update that
// committed and of one that rolled back: every verb on it, those with
// nothing to do included (Del of no keys, DecrBy of math.MinInt64), is
// refused with ErrInvalidArgument, writes nothing, and leaves the caller's
// *Lease as it was.
func TestTxAfterUpdateRefusesEveryVerb(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		l, err := f.db.Lease(f.ctx, "job", "me", time.Minute)
		require.NoError(t, err)
		held := *l
		for _, ending := range []error{nil, errors.New("rolled back")} {
			var kept *state.Tx
			err := f.db.Update(f.ctx, func(tx *state.Tx) error { kept = tx; return ending })
			require.ErrorIs(t, err, ending)
			verbs := map[string]func() error{
				"Get":         func() error { _, err := kept.Get("k"); return err },
				"Set":         func() error { return kept.Set("k", 1) },
				"Del":         func() error { _, err := kept.Del("k"); return err },
				"Del nothing": func() error { _, err := kept.Del(); return err },
				"Incr":        func() error { _, err := kept.Incr("k"); return err },
				"IncrBy":      func() error { _, err := kept.IncrBy("k", 2); return err },
				"Decr":        func() error { _, err := kept.Decr("k"); return err },
				"DecrBy":      func() error { _, err := kept.DecrBy("k", 2); return err },
				"DecrBy min":  func() error { _, err := kept.DecrBy("k", math.MinInt64); return err },
				"CAS":         func() error { _, err := kept.CAS("k", nil, 1); return err },
				"Expire":      func() error { _, err := kept.Expire("k", time.Second); return err },
				"TTL":         func() error { _, err := kept.TTL("k"); return err },
				"Lease":       func() error { _, err := kept.Lease("other", "me", time.Minute); return err },
				"Renew":       func() error { return kept.Renew(l, time.Hour) },
				"Release":     func() error { return kept.Release(l) },
				"Now":         func() error { _, err := kept.Now(); return err },
			}
			for name, verb := range verbs {
				err := verb()
				assert.ErrorIs(t, err, state.ErrInvalidArgument, "%s after Update returned %v", name, ending)
				assert.ErrorContains(t, err, "valid only inside its Update callback", name)
			}
			assert.Equal(t, "<absent>", f.get("k"), "nothing written")
			assert.Equal(t, held, *l, "the lease as it was")
		}
		_, err = f.db.Lease(f.ctx, "other", "someone", time.Minute)
		require.NoError(t, err, "no lease granted")
		require.NoError(t, f.db.Renew(f.ctx, l, time.Minute), "the lease still held")
	})
}
