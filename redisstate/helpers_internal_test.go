package redisstate

import (
	"context"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
)

// remoteMethods is state's remote interface, copied: a compile-time check
// that store has its method set (state.Open checks it at run time too).
type remoteMethods interface {
	Get(ctx context.Context, key string) (state.Value, error)
	Set(ctx context.Context, key string, v state.Value, ttl int64) error
	Del(ctx context.Context, keys []string) (int, error)
	IncrBy(ctx context.Context, key string, delta, ttl int64) (int64, error)
	CAS(ctx context.Context, key string, exp, nv *state.Value, ttl int64) (bool, error)
	Expire(ctx context.Context, key string, ttl int64) (bool, error)
	TTL(ctx context.Context, key string) (time.Duration, error)
	Lease(ctx context.Context, name, owner string, ttl int64) (*state.Lease, error)
	Renew(ctx context.Context, l *state.Lease, ttl int64) error
	Release(ctx context.Context, l *state.Lease) error
	Update(ctx context.Context, fn func(tx any) error) error
	Flush(ctx context.Context, keys []string, deltas map[string]int64) (dropped, kept map[string]error, ran bool, err error)
	Sweep(ctx context.Context) (int, error)
	Scan(ctx context.Context, prefix string, includeExpired bool, fn func(state.KeyInfo) error) error
	Leases(ctx context.Context, includeFree bool, fn func(state.LeaseInfo) error) error
	Stats(ctx context.Context) (state.Stats, error)
	Check(ctx context.Context) ([]string, error)
	Now() time.Time
	Close() error
}

// remoteTxMethods is state's remoteTx interface, copied.
type remoteTxMethods interface {
	Get(key string) (state.Value, error)
	Set(key string, v state.Value, ttl int64) error
	Del(keys []string) (int, error)
	IncrBy(key string, delta, ttl int64) (int64, error)
	CAS(key string, exp, nv *state.Value, ttl int64) (bool, error)
	Expire(key string, ttl int64) (bool, error)
	TTL(key string) (time.Duration, error)
	Lease(name, owner string, ttl int64) (*state.Lease, error)
	Renew(l *state.Lease, ttl int64) error
	Release(l *state.Lease) error
}

var (
	_ remoteMethods   = (*store)(nil)
	_ remoteTxMethods = (*tx)(nil)
)

// openStore opens a store on a fresh server.
func openStore(t *testing.T, opts ...redistest.Option) (*store, *redistest.Server) {
	t.Helper()
	srv := redistest.Start(t, opts...)
	s, err := open(srv.URL("t:"), backendOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, srv
}
