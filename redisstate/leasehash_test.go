package redisstate_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryLeaseVerbReadsADamagedHashAlike writes lease hashes another
// client damaged (a field missing, a token that is not statekit's decimal,
// a deadline no grant writes) and holds every verb that reads one to the
// same answer: Lease, Renew and Release, outside and inside Update, say
// ErrCorrupt naming the lease and leave the hash as it was; Leases says
// ErrCorrupt and Check reports it. Renew and Release of the lease the
// fields name used to answer ErrLeaseLost, or to succeed and rewrite the
// hash, where Lease called it damaged, and Update granted past a token
// Lease refused.
func TestEveryLeaseVerbReadsADamagedHashAlike(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	raw := rawClient(t, srv)
	future := strconv.FormatInt(serverMs(t, raw)+time.Hour.Milliseconds(), 10)
	for name, fields := range map[string][]string{
		"token-leading-zero":   {"owner", "a", "token", "07", "expires", future},
		"token-plus-sign":      {"owner", "a", "token", "+7", "expires", future},
		"token-not-a-number":   {"owner", "a", "token", "abc", "expires", future},
		"expires-17-digits":    {"owner", "a", "token", "7", "expires", "99999999999999999"},
		"expires-plus-sign":    {"owner", "a", "token", "7", "expires", "+" + future},
		"expires-not-a-number": {"owner", "a", "token", "7", "expires", "soon"},
		"owner-missing":        {"token", "7", "expires", future},
		"owner-empty":          {"owner", "", "token", "7", "expires", future},
	} {
		t.Run(name, func(t *testing.T) {
			rkey := "t:lease:" + name
			require.NoError(t, raw.HSet(ctx, rkey, fields).Err())
			before := raw.HGetAll(ctx, rkey).Val()
			l := &state.Lease{Name: name, Owner: "a", Token: 7}
			corrupt := func(what string, err error) {
				t.Helper()
				assert.ErrorIs(t, err, state.ErrCorrupt, "%s", what)
				if err != nil {
					assert.Contains(t, err.Error(), strconv.Quote(name), "%s names the lease", what)
				}
			}
			_, err := db.Lease(ctx, name, "b", time.Minute)
			corrupt("Lease by another owner", err)
			_, err = db.Lease(ctx, name, "a", time.Minute)
			corrupt("Lease by the owner the hash names", err)
			corrupt("Renew", db.Renew(ctx, l, time.Minute))
			corrupt("Release", db.Release(ctx, l))
			for verb, call := range map[string]func(tx *state.Tx) error{
				"Lease":   func(tx *state.Tx) error { _, err := tx.Lease(name, "b", time.Minute); return err },
				"Renew":   func(tx *state.Tx) error { return tx.Renew(l, time.Minute) },
				"Release": func(tx *state.Tx) error { return tx.Release(l) },
			} {
				var inside error
				err := db.Update(ctx, func(tx *state.Tx) error {
					inside = call(tx)
					return nil
				})
				corrupt("tx."+verb, inside)
				if inside == nil {
					assert.NoError(t, err, "tx.%s", verb)
				}
			}
			err = db.Leases(ctx, true, func(state.LeaseInfo) error { return nil })
			corrupt("Leases", err)
			findings, err := db.Check(ctx)
			require.NoError(t, err)
			found := false
			for _, f := range findings {
				found = found || strings.Contains(f, strconv.Quote(name))
			}
			assert.True(t, found, "Check reports the lease %q: %q", name, findings)
			assert.Equal(t, before, raw.HGetAll(ctx, rkey).Val(), "the hash is left as it was")
			assert.Equal(t, 7, int(l.Token), "the caller's lease is unchanged")
			require.NoError(t, raw.Del(ctx, rkey).Err())
		})
	}
}
