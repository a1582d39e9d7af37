package verbtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctxCases: a context that is done before the call.
var ctxCases = []verbCase{
	{"ctx/done-before-the-call-does-nothing", func(t *testing.T, e *env) {
		// A store with something of every kind in it, so that any verb
		// that went ahead would change it.
		e.set("k", "v", state.TTL(time.Hour))
		e.set("n", 7)
		held := e.lease("job", "a", time.Hour)
		keysBefore, leasesBefore := e.stored(), e.leaseRows()

		done, cancel := context.WithCancel(e.ctx)
		cancel()
		nothing := func(tx *state.Tx) error { return tx.Set("k", "changed") }
		calls := []struct {
			verb string
			call func() error
		}{
			{"Get", func() error { _, err := e.db.Get(done, "k"); return err }},
			{"TTL", func() error { _, err := e.db.TTL(done, "k"); return err }},
			{"Set", func() error { return e.db.Set(done, "k", "changed") }},
			{"Del", func() error { _, err := e.db.Del(done, "k", "n"); return err }},
			{"Incr", func() error { _, err := e.db.Incr(done, "n"); return err }},
			{"Decr", func() error { _, err := e.db.Decr(done, "n"); return err }},
			{"IncrBy", func() error { _, err := e.db.IncrBy(done, "fresh", 3, state.TTL(time.Hour)); return err }},
			{"DecrBy", func() error { _, err := e.db.DecrBy(done, "n", 3); return err }},
			{"CAS", func() error { _, err := e.db.CAS(done, "k", "v", "changed"); return err }},
			{"Expire", func() error { _, err := e.db.Expire(done, "k", time.Millisecond); return err }},
			{"Lease", func() error { _, err := e.db.Lease(done, "other", "b", time.Hour); return err }},
			{"Lease by its holder", func() error { _, err := e.db.Lease(done, "job", "a", time.Minute); return err }},
			{"Renew", func() error { return e.db.Renew(done, held, time.Minute) }},
			{"Release", func() error { return e.db.Release(done, held) }},
			{"Update", func() error { return e.db.Update(done, nothing) }},
			{"Scan", func() error {
				return e.db.Scan(done, "", true, func(state.KeyInfo) error { return nil })
			}},
			{"Leases", func() error {
				return e.db.Leases(done, true, func(state.LeaseInfo) error { return nil })
			}},
			{"Stats", func() error { _, err := e.db.Stats(done); return err }},
			{"Check", func() error { _, err := e.db.Check(done); return err }},
			{"Sweep", func() error { _, err := e.db.Sweep(done); return err }},
			{"Flush", func() error { return e.db.Flush(done) }},
		}
		for _, c := range calls {
			err := c.call()
			require.ErrorIs(t, err, context.Canceled, "%s with a done context", c.verb)
			// The message says what happened, as every verb's does: the
			// context's end, with no step of the verb's own work named as
			// if that had failed.
			assert.True(t, strings.HasSuffix(err.Error(), ": statekit: context canceled"),
				"%s with a done context: %q", c.verb, err)
		}
		e.sameKeys(keysBefore, e.stored(), "keys after the refused calls")
		assert.Equal(t, leasesBefore, e.leaseRows(), "leases after the refused calls")
		assert.Equal(t, int64(1), held.Token, "the caller's lease is untouched")
	}},
}

// stored is every key Scan reports, live or expired, without the time left
// to its deadline (which moves while a case runs).
func (e *env) stored() []state.KeyInfo {
	e.t.Helper()
	keys := e.scan("", true)
	for i := range keys {
		keys[i].Left = 0
	}
	return keys
}

// leaseRows is every lease row, held or free, without the time left to its
// deadline.
func (e *env) leaseRows() []state.LeaseInfo {
	e.t.Helper()
	rows := e.leases(true)
	for i := range rows {
		rows[i].Left = 0
	}
	return rows
}

// sameKeys asserts that after holds the keys of before, with the same
// values and the same deadlines. A deadline read back may differ by the
// reading's own error (a server without PEXPIRETIME gives now + PTTL, a
// millisecond off either way), so deadlines match within a second: every
// change a verb could make to one here moves it by minutes or more.
func (e *env) sameKeys(before, after []state.KeyInfo, msg string) {
	e.t.Helper()
	if !assert.Len(e.t, after, len(before), "%s: %v", msg, after) {
		return
	}
	for i, b := range before {
		a := after[i]
		assert.Equal(e.t, b.Key, a.Key, msg)
		assert.Equal(e.t, b.Value, a.Value, "%s: the value of %q", msg, b.Key)
		assert.Equal(e.t, b.Expired, a.Expired, "%s: %q expired", msg, b.Key)
		assert.Equal(e.t, b.Expires.IsZero(), a.Expires.IsZero(), "%s: %q has a deadline", msg, b.Key)
		assert.WithinDuration(e.t, b.Expires, a.Expires, time.Second, "%s: the deadline of %q", msg, b.Key)
	}
}
