package state

import "time"

// The verbs of a Tx, after validation, on the file or on a remote store's
// transaction (remote.go).

func (tx *Tx) get(key string) (Value, error) {
	if tx.rt != nil {
		return tx.rt.Get(key)
	}
	return tx.db.get(tx.ctx, tx.now, key)
}

func (tx *Tx) set(key string, v Value, ttl int64) error {
	if tx.rt != nil {
		return tx.rt.Set(key, v, ttl)
	}
	return tx.db.set(tx.ctx, tx.now, key, v, ttl)
}

func (tx *Tx) del(keys []string) (int, error) {
	if tx.rt != nil {
		return tx.rt.Del(keys)
	}
	return tx.db.del(tx.ctx, tx.now, keys)
}

func (tx *Tx) incrBy(key string, delta, ttl int64) (int64, error) {
	if tx.rt != nil {
		return tx.rt.IncrBy(key, delta, ttl)
	}
	return tx.db.incrBy(tx.ctx, tx.now, key, delta, ttl)
}

func (tx *Tx) cas(key string, exp, nv *Value, ttl int64) (bool, error) {
	if tx.rt != nil {
		return tx.rt.CAS(key, exp, nv, ttl)
	}
	return tx.db.cas(tx.ctx, tx.now, key, exp, nv, ttl)
}

func (tx *Tx) expire(key string, ttl time.Duration) (bool, error) {
	if tx.rt != nil {
		return tx.rt.Expire(key, expireMillis(ttl))
	}
	return tx.db.expire(tx.ctx, tx.now, key, ttl)
}

func (tx *Tx) ttl(key string) (time.Duration, error) {
	if tx.rt != nil {
		return tx.rt.TTL(key)
	}
	return tx.db.ttl(tx.ctx, tx.now, key)
}

func (tx *Tx) lease(name, owner string, ttl int64) (*Lease, error) {
	if tx.rt != nil {
		return tx.rt.Lease(name, owner, ttl)
	}
	return tx.db.lease(tx.ctx, tx.now, name, owner, ttl)
}

func (tx *Tx) renew(l *Lease, ttl int64) error {
	if tx.rt != nil {
		return tx.rt.Renew(l, ttl)
	}
	return tx.db.renew(tx.ctx, tx.now, l, ttl)
}

func (tx *Tx) release(l *Lease) error {
	if tx.rt != nil {
		return tx.rt.Release(l)
	}
	return tx.db.release(tx.ctx, tx.now, l)
}
