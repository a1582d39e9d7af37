package verbtest

import (
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The limits the README states, written out rather than taken from the
// engine's constants, so that a change of those fails here.
const (
	maxKeyBytes   = 1024    // keys, lease names and owners: 1 KiB
	maxValueBytes = 1 << 20 // values: 1 MiB
)

// badKeys are the keys every verb refuses with ErrInvalidKey.
var badKeys = []struct{ name, key string }{
	{"empty", ""},
	{"too long", stringOf('k', maxKeyBytes+1)},
	{"invalid utf-8", "\xff\xfe"},
	{"truncated utf-8", "a\xc3"},
	{"nul byte", "a\x00b"},
}

// badValues are the values Set and CAS refuse with ErrInvalidValue.
var badValues = []struct {
	name  string
	value any
}{
	{"nil", nil},
	{"float", 1.5},
	{"bool", true},
	{"int32", int32(1)},
	{"uint64", uint64(1)},
	{"struct", struct{}{}},
	{"pointer to string", new(string)},
	{"too long bytes", make([]byte, maxValueBytes+1)},
	{"too long string", stringOf('v', maxValueBytes+1)},
}

// keyVerbs is every verb that takes a key, called with key; each must
// refuse a bad one with ErrInvalidKey and write nothing.
func keyVerbs(e *env, key string) map[string]error {
	errOf := func(_ any, err error) error { return err }
	return map[string]error{
		"get":          errOf(e.db.Get(e.ctx, key)),
		"set":          e.db.Set(e.ctx, key, 1),
		"set ttl":      e.db.Set(e.ctx, key, "v", state.TTL(time.Minute)),
		"del":          errOf(e.db.Del(e.ctx, key)),
		"del among":    errOf(e.db.Del(e.ctx, "ok", key)),
		"incr":         errOf(e.db.Incr(e.ctx, key)),
		"incrby":       errOf(e.db.IncrBy(e.ctx, key, 5)),
		"decr":         errOf(e.db.Decr(e.ctx, key)),
		"decrby":       errOf(e.db.DecrBy(e.ctx, key, 5)),
		"cas create":   errOf(e.db.CAS(e.ctx, key, nil, 1)),
		"cas swap":     errOf(e.db.CAS(e.ctx, key, 1, 2)),
		"cas delete":   errOf(e.db.CAS(e.ctx, key, 1, nil)),
		"expire":       errOf(e.db.Expire(e.ctx, key, time.Minute)),
		"expire 0":     errOf(e.db.Expire(e.ctx, key, 0)),
		"ttl":          errOf(e.db.TTL(e.ctx, key)),
		"lease":        errOf(e.db.Lease(e.ctx, key, "owner", time.Minute)),
		"incrbuffered": e.db.IncrBuffered(key, 1),
	}
}

// txKeyVerbs is keyVerbs inside a transaction.
func txKeyVerbs(tx *state.Tx, key string) map[string]error {
	errOf := func(_ any, err error) error { return err }
	return map[string]error{
		"tx get":        errOf(tx.Get(key)),
		"tx set":        tx.Set(key, 1),
		"tx del":        errOf(tx.Del("ok", key)),
		"tx incr":       errOf(tx.Incr(key)),
		"tx incrby":     errOf(tx.IncrBy(key, 5)),
		"tx decr":       errOf(tx.Decr(key)),
		"tx decrby":     errOf(tx.DecrBy(key, 5)),
		"tx cas create": errOf(tx.CAS(key, nil, 1)),
		"tx expire":     errOf(tx.Expire(key, time.Minute)),
		"tx ttl":        errOf(tx.TTL(key)),
		"tx lease":      errOf(tx.Lease(key, "owner", time.Minute)),
	}
}

// inputCases: refused input, error text, and every verb after Close.
var inputCases = []verbCase{
	{"input/bad-keys", func(t *testing.T, e *env) {
		for _, k := range badKeys {
			for verb, err := range keyVerbs(e, k.key) {
				assert.ErrorIs(t, err, state.ErrInvalidKey, "%s with a %s key", verb, k.name)
			}
		}
		e.empty("refused keys write nothing")
		require.NoError(t, e.db.Flush(e.ctx))
		e.empty("and buffer nothing")
	}},

	{"input/bad-keys-in-update", func(t *testing.T, e *env) {
		got := map[string]map[string]error{}
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			for _, k := range badKeys {
				got[k.name] = txKeyVerbs(tx, k.key)
			}
			return nil // the verbs' errors are not returned: the tx commits
		}))
		for name, verbs := range got {
			for verb, err := range verbs {
				assert.ErrorIs(t, err, state.ErrInvalidKey, "%s with a %s key", verb, name)
			}
		}
		e.empty("refused keys in a committed tx write nothing")
	}},

	{"input/bad-values", func(t *testing.T, e *env) {
		for _, v := range badValues {
			assert.ErrorIs(t, e.db.Set(e.ctx, "k", v.value), state.ErrInvalidValue, "set %s", v.name)
			assert.ErrorIs(t, e.db.Set(e.ctx, "k", v.value, state.TTL(time.Minute)), state.ErrInvalidValue, "set %s with TTL", v.name)
			if v.value != nil { // nil is "absent" and "delete" to CAS
				_, err := e.db.CAS(e.ctx, "k", nil, v.value)
				assert.ErrorIs(t, err, state.ErrInvalidValue, "cas new %s", v.name)
				_, err = e.db.CAS(e.ctx, "k", v.value, "x")
				assert.ErrorIs(t, err, state.ErrInvalidValue, "cas expected %s", v.name)
			}
		}
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			for _, v := range badValues {
				assert.ErrorIs(t, tx.Set("k", v.value), state.ErrInvalidValue, "tx set %s", v.name)
				if v.value != nil {
					_, err := tx.CAS("k", nil, v.value)
					assert.ErrorIs(t, err, state.ErrInvalidValue, "tx cas %s", v.name)
				}
			}
			return nil
		}))
		e.empty("refused values write nothing")

		e.set("k", "old", state.TTL(time.Hour))
		for _, v := range badValues {
			assert.ErrorIs(t, e.db.Set(e.ctx, "k", v.value), state.ErrInvalidValue, "set %s over a value", v.name)
		}
		assert.Equal(t, "bytes:old", e.get("k"), "a refused Set keeps the old value")
		e.ttlWithin("k", time.Hour, "and its deadline")
	}},

	{"input/bad-ttls", func(t *testing.T, e *env) {
		for _, d := range []time.Duration{0, -time.Nanosecond, -time.Second} {
			errOf := func(_ any, err error) error { return err }
			calls := map[string]error{
				"set":    e.db.Set(e.ctx, "k", 1, state.TTL(d)),
				"incr":   errOf(e.db.Incr(e.ctx, "k", state.TTL(d))),
				"incrby": errOf(e.db.IncrBy(e.ctx, "k", 2, state.TTL(d))),
				"decr":   errOf(e.db.Decr(e.ctx, "k", state.TTL(d))),
				"decrby": errOf(e.db.DecrBy(e.ctx, "k", 2, state.TTL(d))),
				"cas":    errOf(e.db.CAS(e.ctx, "k", nil, 1, state.TTL(d))),
				"lease":  errOf(e.db.Lease(e.ctx, "job", "a", d)),
			}
			require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
				calls["tx set"] = tx.Set("k", 1, state.TTL(d))
				calls["tx incr"] = errOf(tx.Incr("k", state.TTL(d)))
				calls["tx cas"] = errOf(tx.CAS("k", nil, 1, state.TTL(d)))
				calls["tx lease"] = errOf(tx.Lease("job", "a", d))
				return nil
			}))
			for verb, err := range calls {
				assert.ErrorIs(t, err, state.ErrInvalidTTL, "%s with TTL %v", verb, d)
			}
		}
		e.empty("refused TTLs write nothing")

		l := e.lease("job", "a", time.Minute)
		assert.Equal(t, int64(1), l.Token, "refused leases granted nothing")
		for _, d := range []time.Duration{0, -time.Second} {
			assert.ErrorIs(t, e.db.Renew(e.ctx, l, d), state.ErrInvalidTTL, "renew %v", d)
		}
		var txErr error
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error { txErr = tx.Renew(l, 0); return nil }))
		assert.ErrorIs(t, txErr, state.ErrInvalidTTL, "tx renew 0")
		require.NoError(t, e.db.Release(e.ctx, l), "a refused Renew left the lease held")
	}},

	{"input/nil-write-option", func(t *testing.T, e *env) {
		// A WriteOption left nil (say, set only when a TTL is configured)
		// is refused like a nil Option to Open, not a panic.
		var opt state.WriteOption
		errOf := func(_ any, err error) error { return err }
		calls := map[string]error{
			"set":    e.db.Set(e.ctx, "k", 1, state.TTL(time.Minute), opt),
			"incr":   errOf(e.db.Incr(e.ctx, "k", opt)),
			"incrby": errOf(e.db.IncrBy(e.ctx, "k", 2, opt)),
			"decr":   errOf(e.db.Decr(e.ctx, "k", opt)),
			"decrby": errOf(e.db.DecrBy(e.ctx, "k", 2, opt)),
			"cas":    errOf(e.db.CAS(e.ctx, "k", nil, 1, opt)),
		}
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			calls["tx set"] = tx.Set("k", 1, opt)
			calls["tx incr"] = errOf(tx.Incr("k", opt))
			calls["tx cas"] = errOf(tx.CAS("k", nil, 1, opt))
			return nil
		}))
		for verb, err := range calls {
			assert.ErrorIs(t, err, state.ErrInvalidArgument, verb)
			assert.ErrorContains(t, err, "nil WriteOption", verb)
		}
		e.empty("refused options write nothing")
	}},

	{"input/bad-lease-arguments", func(t *testing.T, e *env) {
		cases := []struct {
			name, lname, owner string
			want               error
		}{
			{"empty owner", "job", "", state.ErrInvalidArgument},
			{"long owner", "job", stringOf('o', maxKeyBytes+1), state.ErrInvalidArgument},
			{"empty name", "", "a", state.ErrInvalidKey},
			{"long name", stringOf('n', maxKeyBytes+1), "a", state.ErrInvalidKey},
		}
		for _, c := range cases {
			_, err := e.db.Lease(e.ctx, c.lname, c.owner, time.Minute)
			assert.ErrorIs(t, err, c.want, c.name)
		}
		for _, err := range []error{e.db.Renew(e.ctx, nil, time.Second), e.db.Release(e.ctx, nil)} {
			assert.ErrorIs(t, err, state.ErrInvalidArgument, "a nil *Lease")
		}
		var renewErr, releaseErr, leaseErr error
		require.NoError(t, e.db.Update(e.ctx, func(tx *state.Tx) error {
			renewErr = tx.Renew(nil, time.Second)
			releaseErr = tx.Release(nil)
			_, leaseErr = tx.Lease("job", "", time.Minute)
			return nil
		}))
		assert.ErrorIs(t, renewErr, state.ErrInvalidArgument, "tx renew nil")
		assert.ErrorIs(t, releaseErr, state.ErrInvalidArgument, "tx release nil")
		assert.ErrorIs(t, leaseErr, state.ErrInvalidArgument, "tx lease empty owner")
		e.empty("refused lease calls write nothing")

		l := e.lease("job", stringOf('o', maxKeyBytes), time.Minute)
		assert.Equal(t, int64(1), l.Token, "an owner at MaxKeyBytes is fine, and nothing was granted before")
		l2 := e.lease(stringOf('n', maxKeyBytes), "a", time.Minute)
		assert.Equal(t, int64(1), l2.Token, "a name at MaxKeyBytes is fine")
	}},

	{"input/errors-name-verb-and-key", func(t *testing.T, e *env) {
		e.set("text", "x")
		l := e.lease("job", "a", time.Minute)
		require.NoError(t, e.db.Release(e.ctx, l))
		e.lease("job", "b", time.Minute)

		errOf := func(_ any, err error) error { return err }
		var txIncrErr error
		updateErr := e.db.Update(e.ctx, func(tx *state.Tx) error {
			_, txIncrErr = tx.Incr("text")
			return txIncrErr
		})
		calls := []struct {
			name, want string
			sentinel   error
			err        error
		}{
			{"get", `get "missing": `, state.ErrNotFound, errOf(e.db.Get(e.ctx, "missing"))},
			{"ttl", `ttl "missing": `, state.ErrNotFound, errOf(e.db.TTL(e.ctx, "missing"))},
			{"incr", `incr "text": `, state.ErrNotInteger, errOf(e.db.Incr(e.ctx, "text"))},
			{"incrby", `incr "text": `, state.ErrNotInteger, errOf(e.db.IncrBy(e.ctx, "text", 2))},
			{"decr", `decr "text": `, state.ErrNotInteger, errOf(e.db.Decr(e.ctx, "text"))},
			{"decrby", `decr "text": `, state.ErrNotInteger, errOf(e.db.DecrBy(e.ctx, "text", 2))},
			{"cas", `cas "k": `, state.ErrInvalidValue, errOf(e.db.CAS(e.ctx, "k", struct{}{}, "v"))},
			{"expire", `expire "kkkk`, state.ErrInvalidKey, errOf(e.db.Expire(e.ctx, strings.Repeat("k", maxKeyBytes+1), time.Second))},
			{"del", `del "a", "b", "c" and 2 more: `, state.ErrInvalidKey, errOf(e.db.Del(e.ctx, "a", "b", "c", "d", ""))},
			{"del names the bad key", `: key 5 of 5 ("") is empty`, state.ErrInvalidKey, errOf(e.db.Del(e.ctx, "a", "b", "c", "d", ""))},
			{"set", `set "k": `, state.ErrInvalidTTL, e.db.Set(e.ctx, "k", 1, state.TTL(-time.Second))},
			{"lease", `lease "job": `, state.ErrLeaseHeld, errOf(e.db.Lease(e.ctx, "job", "c", time.Minute))},
			{"renew", `renew "job" token 1: `, state.ErrLeaseLost, e.db.Renew(e.ctx, l, time.Second)},
			{"release", `release "job" token 1: `, state.ErrLeaseLost, e.db.Release(e.ctx, l)},
			{"tx incr", `incr "text": `, state.ErrNotInteger, txIncrErr},
			{"update", `incr "text": `, state.ErrNotInteger, updateErr},
			{"incrbuffered", `incrbuffered "": `, state.ErrInvalidKey, e.db.IncrBuffered("", 1)},
			{"update nil", `update: `, state.ErrInvalidArgument, e.db.Update(e.ctx, nil)},
			{"scan nil", `scan: `, state.ErrInvalidArgument, e.db.Scan(e.ctx, "", false, nil)},
			{"leases nil", `leases: `, state.ErrInvalidArgument, e.db.Leases(e.ctx, false, nil)},
		}
		for _, c := range calls {
			require.Error(t, c.err, c.name)
			assert.ErrorIs(t, c.err, c.sentinel, c.name)
			assert.Contains(t, c.err.Error(), c.want, c.name)
		}
		assert.Equal(t, txIncrErr, updateErr, "Update returns the callback's error as it is")
	}},

	{"input/every-verb-after-close", func(t *testing.T, e *env) {
		e.set("k", 1)
		l := e.lease("job", "a", time.Minute)
		require.NoError(t, e.db.Close())

		errOf := func(_ any, err error) error { return err }
		calls := []struct {
			name, want string
			err        error
		}{
			{"get", `get "k"`, errOf(e.db.Get(e.ctx, "k"))},
			{"set", `set "k"`, e.db.Set(e.ctx, "k", 2)},
			{"del", `del "k"`, errOf(e.db.Del(e.ctx, "k"))},
			{"incr", `incr "k"`, errOf(e.db.Incr(e.ctx, "k"))},
			{"incrby", `incr "k"`, errOf(e.db.IncrBy(e.ctx, "k", 2))},
			{"decr", `decr "k"`, errOf(e.db.Decr(e.ctx, "k"))},
			{"decrby", `decr "k"`, errOf(e.db.DecrBy(e.ctx, "k", 2))},
			{"cas", `cas "k"`, errOf(e.db.CAS(e.ctx, "k", 1, 2))},
			{"expire", `expire "k"`, errOf(e.db.Expire(e.ctx, "k", time.Minute))},
			{"ttl", `ttl "k"`, errOf(e.db.TTL(e.ctx, "k"))},
			{"lease", `lease "job"`, errOf(e.db.Lease(e.ctx, "job", "a", time.Minute))},
			{"renew", `renew "job"`, e.db.Renew(e.ctx, l, time.Minute)},
			{"release", `release "job"`, e.db.Release(e.ctx, l)},
			{"update", `update`, e.db.Update(e.ctx, func(tx *state.Tx) error { return tx.Set("k", 3) })},
			{"incrbuffered", `incrbuffered "k"`, e.db.IncrBuffered("k", 1)},
			{"flush", `flush`, e.db.Flush(e.ctx)},
			{"scan", `scan`, e.db.Scan(e.ctx, "", true, func(state.KeyInfo) error { return nil })},
			{"leases", `leases`, e.db.Leases(e.ctx, true, func(state.LeaseInfo) error { return nil })},
			{"stats", `stats`, errOf(e.db.Stats(e.ctx))},
			{"check", `check`, errOf(e.db.Check(e.ctx))},
			{"sweep", `sweep`, errOf(e.db.Sweep(e.ctx))},
			{"close", `close`, e.db.Close()},
		}
		for _, c := range calls {
			assert.ErrorIs(t, c.err, state.ErrClosed, c.name)
			if c.err != nil {
				assert.Contains(t, c.err.Error(), c.want, c.name)
			}
		}
		assert.ErrorIs(t, e.db.Close(), state.ErrClosed, "Close again")
	}},
}
