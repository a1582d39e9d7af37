package stress

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/model"
)

// The key space: small, so that processes collide on every key. Each epoch
// of the run (Config.EpochEvery) has keys of its own, "e<epoch>/<key>", so
// that the history of one key, which takes the linearizability check time and memory
// that grow faster than its length, stays short however long the run.
var (
	// plainKeys take every key verb, transactions and buffered increments.
	plainKeys = []string{"a", "b", "c"}
	// coldKeys take the same verbs, an eighth as often: between two writes
	// their TTLs run out, so reads meet expired keys and sweeps delete
	// them while the epoch goes on.
	coldKeys = []string{"t0", "t1"}
	// counterKeys take only IncrBy +1, so their final values are exact.
	counterKeys = []string{"n0", "n1"}
	// leaseNames are the leases holders fight over; each guards the fenced
	// resource row of the same name.
	leaseNames = []string{"L0", "L1"}
	// transferKeys are a pair only transfers write, and audits read in
	// one Update (package checks): every snapshot sums to zero.
	transferKeys = []string{"xa", "xb"}
	// groupKeys share a hash tag, so the linearizability check takes them
	// as one partition (per epoch: each epoch is checked on its own) and
	// checks every count of a Del of several of them, where on keys
	// checked one at a time only a count of none or all is.
	groupKeys = []string{"{g}a", "{g}b", "{g}c"}
)

// Bounds of the workload.
const (
	leaseTTLMinMillis = 100 // a killed holder's lease frees itself within a second
	leaseTTLMaxMillis = 800
	maxUpdateOps      = 3
	maxFlushOps       = 2
)

// keyTTLsMillis are the TTLs Set, IncrBy and Expire give: some expire
// within a call or two, some outlive the run. Zero and below: none, or for
// Expire, delete.
var keyTTLsMillis = []int64{0, 0, 0, 30, 100, 300, 1000, 5000}

// workload draws one client's calls from its own seeded source.
type workload struct {
	rng       *rand.Rand
	prefix    string // the current epoch's key prefix
	stepClock bool   // workers sweep as a recorded verb
}

// pick returns one of from, in the current epoch.
func (w *workload) pick(from []string) string { return w.prefix + from[w.rng.IntN(len(from))] }

// epochPrefix is the key prefix of epoch n.
func epochPrefix(n int64) string { return "e" + strconv.FormatInt(n, 10) + "/" }

// isCounter reports whether key is a counter key of some epoch.
func isCounter(key string) bool {
	_, name, ok := strings.Cut(key, "/")
	return ok && slices.Contains(counterKeys, name)
}

// value is a small integer or a short byte string; "7" collides with 7 to
// catch a store that confuses types.
func (w *workload) value() model.Value {
	if w.rng.IntN(5) < 3 {
		return model.Int(int64(w.rng.IntN(12) - 2))
	}
	return model.Bytes([]string{"x", "y", "7", ""}[w.rng.IntN(4)])
}

// optValue is a value or nil (absent, for CAS).
func (w *workload) optValue(nilOneIn int) *model.Value {
	if w.rng.IntN(nilOneIn) == 0 {
		return nil
	}
	return model.Ptr(w.value())
}

func (w *workload) keyTTL() int64 { return keyTTLsMillis[w.rng.IntN(len(keyTTLsMillis))] }

func (w *workload) leaseTTL() int64 {
	return leaseTTLMinMillis + w.rng.Int64N(leaseTTLMaxMillis-leaseTTLMinMillis+1)
}

// plain returns a call of a key verb on the plain keys; inTx leaves out
// what cannot run inside an Update. Buffered increments are not among
// them: a worker buffers them itself (buffered).
func (w *workload) plain(inTx bool) model.Input {
	n := 11
	if inTx {
		n = 7
	}
	keys := plainKeys
	if w.rng.IntN(8) == 0 {
		keys = coldKeys
	}
	key := w.pick(keys)
	switch w.rng.IntN(n) {
	case 0:
		return model.Input{Kind: model.Get, Key: key}
	case 1:
		return model.Input{Kind: model.Set, Key: key, Value: w.value(), TTLMillis: w.keyTTL()}
	case 2:
		return model.Input{Kind: model.IncrBy, Key: key, Delta: int64(w.rng.IntN(7) - 3), TTLMillis: w.keyTTL()}
	case 3:
		return model.Input{Kind: model.CAS, Key: key, Expected: w.optValue(3), New: w.optValue(6)}
	case 4:
		ttl := w.keyTTL()
		if ttl == 0 {
			ttl = -1
		}
		return model.Input{Kind: model.Expire, Key: key, TTLMillis: ttl}
	case 5:
		return model.Input{Kind: model.TTL, Key: key}
	case 6:
		return model.Input{Kind: model.Del, Keys: []string{key}}
	case 7:
		return model.Input{Kind: model.Del, Keys: []string{key, w.pick(keys)}}
	case 8:
		ops := make([]model.Input, 2+w.rng.IntN(maxUpdateOps-1))
		for i := range ops {
			ops[i] = w.plain(true)
		}
		return model.Input{Kind: model.Update, Ops: ops, Abort: w.rng.IntN(8) == 0}
	case 9:
		// On the real clock the engine sweeps in the background and
		// inline, and the sweep recorder records each statement.
		if w.stepClock && w.rng.IntN(4) == 0 {
			return model.Input{Kind: model.Sweep}
		}
		return model.Input{Kind: model.Get, Key: key}
	}
	return model.Input{Kind: model.TTL, Key: key}
}

// read returns a reader's call: a Get or a TTL of a plain key, a cold key
// (often expired) or a counter key, or now and then a listing, as statectl
// dump --prefix (of the current epoch's keys, fewer than a page) and
// statectl leases print them, with or without --all (the leases of the
// current epoch: the check takes an epoch at a time).
func (w *workload) read() model.Input {
	switch w.rng.IntN(16) {
	case 0:
		return model.Input{Kind: model.Scan, Key: w.prefix, All: w.rng.IntN(2) == 0}
	case 1:
		return model.Input{Kind: model.Leases, Key: w.prefix, All: w.rng.IntN(2) == 0}
	}
	keys := plainKeys
	switch w.rng.IntN(4) {
	case 0:
		keys = coldKeys
	case 1:
		keys = counterKeys
	}
	if w.rng.IntN(2) == 0 {
		return model.Input{Kind: model.TTL, Key: w.pick(keys)}
	}
	return model.Input{Kind: model.Get, Key: w.pick(keys)}
}

// increment is one buffered increment: IncrBuffered(key, delta).
type increment struct {
	key   string
	delta int64
}

// buffered returns one or two buffered increments, on plain and counter
// keys, each adding 0 to 3 (never less: a counter key's final value is
// bounded by its increments only when none subtracts).
func (w *workload) buffered() []increment {
	out := make([]increment, 1+w.rng.IntN(maxFlushOps))
	for i := range out {
		keys := plainKeys
		if w.rng.IntN(2) == 0 {
			keys = counterKeys
		}
		out[i] = increment{key: w.pick(keys), delta: w.rng.Int64N(4)}
	}
	return out
}

// transfer returns a move of 1 to 9 between the epoch's transfer pair,
// or, one time in three, an audit of the pair.
func (w *workload) transfer() model.Input {
	a, b := w.prefix+transferKeys[0], w.prefix+transferKeys[1]
	if w.rng.IntN(3) == 0 {
		return checks.Audit(a, b)
	}
	if w.rng.IntN(2) == 0 {
		a, b = b, a
	}
	return checks.Transfer(a, b, 1+w.rng.Int64N(9), w.rng.IntN(2) == 0)
}

// isTransferPair reports whether a and b, in that order, are one epoch's
// transfer pair: what an audit reads.
func isTransferPair(a, b string) bool {
	ea, na, okA := strings.Cut(a, "/")
	eb, nb, okB := strings.Cut(b, "/")
	return okA && okB && ea == eb && na == transferKeys[0] && nb == transferKeys[1]
}

// group returns a call on the key group: a Set or an IncrBy with a TTL
// (some expire within a call or two), a Del of two or three of its keys,
// an Update that deletes two and sets one, or an Update that reads each
// key, its value or its TTL (each key's answer pins that key's deadline
// on its own, after lost writes of several of them: readaxes.go in
// package linearizability).
func (w *workload) group() model.Input {
	del := func() model.Input {
		in := model.Input{Kind: model.Del}
		for range 2 + w.rng.IntN(2) {
			in.Keys = append(in.Keys, w.pick(groupKeys))
		}
		return in
	}
	set := func() model.Input {
		return model.Input{Kind: model.Set, Key: w.pick(groupKeys), Value: w.value(), TTLMillis: w.keyTTL()}
	}
	switch w.rng.IntN(9) {
	case 0, 1, 2:
		return set()
	case 3:
		return model.Input{Kind: model.IncrBy, Key: w.pick(groupKeys), Delta: 1, TTLMillis: w.keyTTL()}
	case 4, 5, 6:
		return del()
	case 7:
		return model.Input{Kind: model.Update, Ops: []model.Input{del(), set()}}
	}
	in := model.Input{Kind: model.Update}
	for _, k := range groupKeys {
		kind := model.Get
		if w.rng.IntN(2) == 0 {
			kind = model.TTL
		}
		in.Ops = append(in.Ops, model.Input{Kind: kind, Key: w.prefix + k})
	}
	return in
}

// counter returns a +1 on a counter key.
func (w *workload) counter() model.Input {
	return model.Input{Kind: model.IncrBy, Key: w.pick(counterKeys), Delta: 1}
}
