// Package drive runs model inputs against the real engine and answers in
// the model's terms, so the simulator, the stress test and the engine's
// model-based test compare one engine call with one model.Step the same way.
package drive

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// errAbort is what an Update callback returns when its input says Abort.
var errAbort = errors.New("drive: update aborted by its callback")

// Verbs is what both a *state.DB and a *state.Tx can do, without context.
type verbs interface {
	Get(key string) (state.Value, error)
	Set(key string, value any, opts ...state.WriteOption) error
	Del(keys ...string) (int, error)
	IncrBy(key string, delta int64, opts ...state.WriteOption) (int64, error)
	CAS(key string, expected, new any, opts ...state.WriteOption) (bool, error)
	Expire(key string, ttl time.Duration) (bool, error)
	TTL(key string) (time.Duration, error)
	Lease(name, owner string, ttl time.Duration) (*state.Lease, error)
	Renew(l *state.Lease, ttl time.Duration) error
	Release(l *state.Lease) error
}

// dbVerbs adapts a *state.DB to verbs with one context.
type dbVerbs struct {
	ctx context.Context
	db  *state.DB
}

func (d dbVerbs) Get(k string) (state.Value, error) { return d.db.Get(d.ctx, k) }
func (d dbVerbs) Set(k string, v any, o ...state.WriteOption) error {
	return d.db.Set(d.ctx, k, v, o...)
}
func (d dbVerbs) Del(keys ...string) (int, error) { return d.db.Del(d.ctx, keys...) }
func (d dbVerbs) IncrBy(k string, n int64, o ...state.WriteOption) (int64, error) {
	return d.db.IncrBy(d.ctx, k, n, o...)
}
func (d dbVerbs) CAS(k string, e, n any, o ...state.WriteOption) (bool, error) {
	return d.db.CAS(d.ctx, k, e, n, o...)
}
func (d dbVerbs) Expire(k string, ttl time.Duration) (bool, error) {
	return d.db.Expire(d.ctx, k, ttl)
}
func (d dbVerbs) TTL(k string) (time.Duration, error) { return d.db.TTL(d.ctx, k) }
func (d dbVerbs) Lease(n, o string, ttl time.Duration) (*state.Lease, error) {
	return d.db.Lease(d.ctx, n, o, ttl)
}
func (d dbVerbs) Renew(l *state.Lease, ttl time.Duration) error { return d.db.Renew(d.ctx, l, ttl) }
func (d dbVerbs) Release(l *state.Lease) error                  { return d.db.Release(d.ctx, l) }

// Result is one engine call in the model's terms.
type Result struct {
	// Out is the answer. Meaningful only when Err is nil.
	Out model.Output
	// Err is an error the model does not know (I/O, disk full, busy,
	// closed): the call's outcome is unknown to a checker.
	Err error
}

// Run runs in on db. For Flush, Run buffers each sub-input with
// IncrBuffered and then calls Flush; Sweep calls Sweep; Scan and Leases
// call Scan and Leases and collect every row (for Leases, every row
// whose name has the input's prefix: the engine's Leases takes none). A listing longer than the
// engine's page reads each page at a time of its own, while the Input has
// one NowMillis (the last page's): callers keep listings to one page.
func Run(ctx context.Context, db *state.DB, in model.Input) Result {
	switch in.Kind {
	case model.Update:
		return runUpdate(ctx, db, in)
	case model.Flush:
		return runFlush(ctx, db, in)
	case model.Sweep:
		n, err := db.Sweep(ctx)
		if err != nil {
			return Result{Err: err}
		}
		return Result{Out: model.Output{N: n}}
	case model.Scan:
		out := model.Output{Rows: []model.KeyRow{}}
		err := db.Scan(ctx, in.Key, in.All, func(k state.KeyInfo) error {
			out.Rows = append(out.Rows, model.KeyRow{Key: k.Key, Entry: model.Entry{Value: Value(k.Value), ExpiresAt: unixMillis(k.Expires)}})
			return nil
		})
		if err != nil {
			return Result{Err: err}
		}
		return Result{Out: out}
	case model.Leases:
		out := model.Output{Leases: []model.NamedLease{}}
		err := db.Leases(ctx, in.All, func(l state.LeaseInfo) error {
			if !strings.HasPrefix(l.Name, in.Key) {
				return nil // the engine lists every lease; the caller asked for these
			}
			out.Leases = append(out.Leases, model.NamedLease{Name: l.Name,
				LeaseRow: model.LeaseRow{Owner: l.Owner, Token: l.Token, ExpiresAt: unixMillis(l.Expires)}})
			return nil
		})
		if err != nil {
			return Result{Err: err}
		}
		return Result{Out: out}
	}
	out, err := one(dbVerbs{ctx, db}, in)
	return Result{Out: out, Err: err}
}

func runUpdate(ctx context.Context, db *state.DB, in model.Input) Result {
	var subs []model.Output
	var kind model.ErrKind
	err := db.Update(ctx, func(tx *state.Tx) error {
		// On a store opened from a URL the callback may run again: only
		// the last run's answers count.
		subs, kind = subs[:0], model.ErrNone
		for _, op := range in.Ops {
			out, err := one(tx, op)
			if err != nil {
				return err
			}
			subs = append(subs, out)
			if out.Err != model.ErrNone && out.Err != model.ErrNotFound {
				kind = out.Err
				return errAbort
			}
		}
		if in.Abort {
			kind = model.ErrAborted
			return errAbort
		}
		return nil
	})
	if err != nil && (!errors.Is(err, errAbort) || errors.Is(err, state.ErrIO)) {
		return Result{Err: err} // an abort the handle's failure came after is that failure
	}
	return Result{Out: model.Output{Err: kind, Sub: subs}}
}

func runFlush(ctx context.Context, db *state.DB, in model.Input) Result {
	out := model.Output{Sub: make([]model.Output, len(in.Ops))}
	for _, op := range in.Ops {
		if err := db.IncrBuffered(op.Key, op.Delta); err != nil {
			return Result{Err: err}
		}
	}
	err := db.Flush(ctx)
	var fe *state.FlushError
	if err != nil && (!errors.As(err, &fe) || len(fe.Kept) > 0) {
		return Result{Err: err} // kept deltas are still buffered: no answer of the model's
	}
	for i, op := range in.Ops {
		if fe != nil {
			if kerr, ok := fe.Dropped[op.Key]; ok {
				out.Sub[i].Err = errKind(kerr)
			}
		}
	}
	return Result{Out: out}
}

// one runs a single verb; the error is one the model does not know.
func one(v verbs, in model.Input) (model.Output, error) {
	var out model.Output
	var err error
	switch in.Kind {
	case model.Get:
		var val state.Value
		val, err = v.Get(in.Key)
		out.Value = Value(val)
	case model.Set:
		err = v.Set(in.Key, arg(in.Value), ttlOpt(in.TTLMillis)...)
	case model.Del:
		out.N, err = v.Del(in.Keys...)
	case model.IncrBy:
		out.Int, err = v.IncrBy(in.Key, in.Delta, ttlOpt(in.TTLMillis)...)
	case model.CAS:
		out.OK, err = v.CAS(in.Key, ptrArg(in.Expected), ptrArg(in.New), ttlOpt(in.TTLMillis)...)
	case model.Expire:
		out.OK, err = v.Expire(in.Key, millis(in.TTLMillis))
	case model.TTL:
		var d time.Duration
		d, err = v.TTL(in.Key)
		out.TTLMillis = d.Milliseconds()
		if d == state.NoExpiry {
			out.TTLMillis = model.NoExpiry
		}
	case model.Lease:
		var l *state.Lease
		l, err = v.Lease(in.Key, in.Owner, millis(in.TTLMillis))
		if l != nil {
			out.Token, out.ExpiresAt, out.OK = l.Token, l.Expires.UnixMilli(), l.Extended
		}
		var held *state.LeaseHeldError
		if errors.As(err, &held) {
			out.Owner, out.ExpiresAt = held.Owner, held.Expires.UnixMilli()
		}
	case model.Renew:
		l := &state.Lease{Name: in.Key, Owner: in.Owner, Token: in.Token}
		err = v.Renew(l, millis(in.TTLMillis))
		out.ExpiresAt = l.Expires.UnixMilli()
	case model.Release:
		err = v.Release(&state.Lease{Name: in.Key, Owner: in.Owner, Token: in.Token})
	default:
		return out, errors.New("drive: " + in.Kind.String() + " cannot run here")
	}
	if err != nil {
		out = model.Output{Owner: out.Owner, ExpiresAt: out.ExpiresAt}
		if out.Err = errKind(err); out.Err == errUnknown {
			return model.Output{}, err
		}
		if out.Err != model.ErrLeaseHeld {
			out.Owner, out.ExpiresAt = "", 0
		}
	}
	return out, nil
}

// errUnknown marks an error the model has no kind for.
const errUnknown = model.ErrKind(255)

// errKind maps an engine error to the model's, through checks.ErrKind
// (the one map the simulator and the stress run share); errUnknown when the
// model has no kind for it.
func errKind(err error) model.ErrKind {
	if k, ok := checks.ErrKind(err); ok {
		return k
	}
	return errUnknown
}

// Value converts an engine value to the model's.
func Value(v state.Value) model.Value {
	if n, ok := v.Int(); ok {
		return model.Int(n)
	}
	return model.Bytes(string(v.Bytes()))
}

// arg converts a model value to what the engine's verbs take.
func arg(v model.Value) any {
	if v.IsInt {
		return v.Int
	}
	return v.Bytes
}

func ptrArg(v *model.Value) any {
	if v == nil {
		return nil
	}
	return arg(*v)
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// ttlOpt is the TTL option for ttlMillis > 0, none otherwise.
func ttlOpt(ms int64) []state.WriteOption {
	if ms <= 0 {
		return nil
	}
	return []state.WriteOption{state.TTL(millis(ms))}
}

// unixMillis returns t in unix milliseconds, and 0 for the zero Time (no
// deadline, or a released lease).
func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
