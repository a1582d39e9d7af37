package redisstate

import (
	"math"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/state"
)

// write marks key's state changed.
func (t *tx) write(key string, ks *keyState) {
	if !ks.dirty {
		ks.dirty = true
		t.order = append(t.order, t.s.keyOf(key))
	}
}

// Get is Get inside the transaction.
func (t *tx) Get(key string) (state.Value, error) {
	ks, err := t.key(key, true)
	if err != nil {
		return state.Value{}, err
	}
	if !ks.exists {
		return state.Value{}, state.ErrNotFound
	}
	return decode(ks.val)
}

// Set is Set inside the transaction.
func (t *tx) Set(key string, v state.Value, ttl int64) error {
	ks, err := t.key(key, false)
	if err != nil {
		return err
	}
	ks.exists, ks.val, ks.dl = true, encode(v), after(ttl)
	t.write(key, ks)
	return nil
}

// Del is Del inside the transaction.
func (t *tx) Del(keys []string) (int, error) {
	keys = dedup(keys)
	if err := t.readAll(keys); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		ks, err := t.key(k, true)
		if err != nil {
			return n, err
		}
		if ks.exists {
			n++
			ks.exists, ks.val, ks.dl = false, "", deadline{}
			t.write(k, ks)
		}
	}
	return n, nil
}

// IncrBy is IncrBy inside the transaction.
func (t *tx) IncrBy(key string, delta, ttl int64) (int64, error) {
	ks, err := t.key(key, true)
	if err != nil {
		return 0, err
	}
	if !ks.exists {
		ks.exists, ks.val, ks.dl = true, encode(state.IntValue(delta)), after(ttl)
		t.write(key, ks)
		return delta, nil
	}
	v, err := decode(ks.val)
	if err != nil {
		return 0, err
	}
	n, ok := v.Int()
	if !ok {
		return 0, state.ErrNotInteger
	}
	if delta > 0 && n > math.MaxInt64-delta || delta < 0 && n < math.MinInt64-delta {
		return 0, state.ErrOverflow
	}
	n += delta
	ks.val = encode(state.IntValue(n))
	t.write(key, ks)
	return n, nil
}

// CAS is CAS inside the transaction.
func (t *tx) CAS(key string, exp, nv *state.Value, ttl int64) (bool, error) {
	ks, err := t.key(key, true)
	if err != nil {
		return false, err
	}
	if exp == nil && ks.exists || exp != nil && (!ks.exists || ks.val != encode(*exp)) {
		return false, nil
	}
	switch {
	case nv == nil:
		if ks.exists {
			ks.exists, ks.val, ks.dl = false, "", deadline{}
			t.write(key, ks)
		}
	case ttl > 0:
		ks.exists, ks.val, ks.dl = true, encode(*nv), after(ttl)
		t.write(key, ks)
	case !ks.exists:
		ks.exists, ks.val, ks.dl = true, encode(*nv), deadline{}
		t.write(key, ks)
	default:
		ks.val = encode(*nv)
		t.write(key, ks)
	}
	return true, nil
}

// Expire is Expire inside the transaction.
func (t *tx) Expire(key string, ttl int64) (bool, error) {
	ks, err := t.key(key, true)
	if err != nil {
		return false, err
	}
	if !ks.exists {
		return false, nil
	}
	if ttl <= 0 {
		ks.exists, ks.val, ks.dl = false, "", deadline{}
	} else {
		ks.dl = after(ttl)
	}
	t.write(key, ks)
	return true, nil
}

// TTL is TTL inside the transaction.
func (t *tx) TTL(key string) (time.Duration, error) {
	ks, err := t.key(key, true)
	if err != nil {
		return 0, err
	}
	switch {
	case !ks.exists:
		return 0, state.ErrNotFound
	case ks.dl.none():
		return state.NoExpiry, nil
	case ks.dl.rel > 0:
		// Written here: ttl from now, whatever now ends up being.
		return msDuration(ks.dl.rel), nil
	}
	t.pinned = true // a deadline read from the server, counted from now
	return msDuration(ks.dl.abs - t.now), nil
}

// lease returns the state of a lease hash, read (and WATCHed) once.
func (t *tx) lease(name string) (*leaseState, error) {
	rkey := t.s.leaseOf(name)
	if err := t.bind(rkey, name); err != nil {
		return nil, err
	}
	if ls := t.leases[rkey]; ls != nil {
		return ls, nil
	}
	var watch *redis.Cmd
	var get *redis.SliceCmd
	_, err := t.conn.Pipelined(t.ctx, func(p redis.Pipeliner) error {
		watch = p.Do(t.ctx, "WATCH", rkey)
		get = p.HMGet(t.ctx, rkey, "owner", "token", "expires")
		return nil
	})
	if err == nil {
		err = watch.Err()
	}
	if err != nil {
		return nil, t.cmdErr(err)
	}
	f, err := get.Result()
	if err != nil {
		return nil, t.cmdErr(err)
	}
	ls := &leaseState{}
	if f[0] != nil || f[1] != nil || f[2] != nil {
		owner, token, expires, bad := leaseHash(f[0], f[1], f[2])
		if bad != "" {
			return nil, damaged("lease", name)
		}
		ls.exists, ls.owner, ls.token, ls.expires = true, owner, token, deadline{abs: expires}
	}
	t.leases[rkey] = ls
	// A lease's expiry is its hash's field, not Redis's: the time it
	// was read at does not matter, only the transaction's now.
	if err := t.ensureNow(); err != nil {
		return nil, err
	}
	return ls, nil
}

// Lease is Lease inside the transaction, with Lease's durability check.
func (t *tx) Lease(name, owner string, ttl int64) (*state.Lease, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	gen, err := t.s.checkDurable(t.ctx, true)
	if err != nil {
		return nil, err
	}
	if !t.checked {
		t.checked, t.durableGen = true, gen
	}
	ls, err := t.lease(name)
	if err != nil {
		return nil, err
	}
	// Every answer from here on depends on the exact now: the holder's
	// Left, the grant's Expires.
	t.pinned = true
	live := ls.live(t.now)
	if live && ls.owner != owner {
		until := ls.expires.at(t.now)
		return nil, &state.LeaseHeldError{Name: name, Owner: ls.owner, Expires: time.UnixMilli(until),
			Left: msDuration(until - t.now)}
	}
	if !live {
		if ls.token == math.MaxInt64 {
			return nil, damaged("lease", name)
		}
		ls.token++
	}
	ls.exists, ls.owner, ls.expires, ls.dirty = true, owner, after(ttl), true
	t.granted = true
	return &state.Lease{Name: name, Owner: owner, Token: ls.token, Expires: time.UnixMilli(t.now + ttl),
		Extended: live}, nil
}

// held returns l's lease state when l is live, or ErrLeaseLost.
func (t *tx) held(l *state.Lease) (*leaseState, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	ls, err := t.lease(l.Name)
	if err != nil {
		return nil, err
	}
	if !ls.live(t.now) || ls.owner != l.Owner || ls.token != l.Token {
		return nil, state.ErrLeaseLost
	}
	t.pinned = true // held at now: Renew's Expires and Release's time follow now
	return ls, nil
}

// Renew is Renew inside the transaction.
func (t *tx) Renew(l *state.Lease, ttl int64) error {
	ls, err := t.held(l)
	if err != nil {
		return err
	}
	ls.expires, ls.dirty = after(ttl), true
	l.Expires = time.UnixMilli(t.now + ttl)
	return nil
}

// Release is Release inside the transaction.
func (t *tx) Release(l *state.Lease) error {
	ls, err := t.held(l)
	if err != nil {
		return err
	}
	ls.expires, ls.dirty = deadline{}, true
	l.Expires = time.UnixMilli(t.now)
	return nil
}
