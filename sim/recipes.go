package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statekit/statekit/cache"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/internal/recipehooks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/ratelimit"
)

// The recipe workload: beside the verbs, clients make rate-limit decisions
// with each of package ratelimit's limiters and fill package cache's
// read-through cache, through the same handles, faults and scheduler. Their
// calls are not in the linearizability history (their keys are their own);
// the recipe checks below judge what the callers were told.
//
// Every draw comes from a stream of its own (streamRecipe), so the verbs'
// stream draws what it drew before the recipes were added.

// The recipe checks, as Violation.Check names them.
const (
	// CheckRateLimit: per limiter key, the requests allowed never exceed
	// what the limiter promises (see checkLimits).
	CheckRateLimit = "ratelimit"
	// CheckCache: a cache caller returns only a value some fill's fn
	// produced, and a fill whose lease was taken over never writes.
	CheckCache = "cache"
)

// streamRecipe is the recipe workload's stream.
const streamRecipe uint64 = 0x51a3001

// The recipe workload's shape.
const (
	// recipeOneIn: one client operation in recipeOneIn is a recipe's.
	recipeOneIn = 5
	// recipeWindow is the limiters' window: longer than any wait of one
	// decision between its now and its verb (a pause and a busy timeout),
	// so only a key swept by a process a window ahead starts a count over.
	recipeWindow = 20 * time.Second
	// Limits: the fixed and sliding windows allow these per window; the
	// token bucket refills bucketRate per window and holds bucketBurst.
	fixedLimit, slidingLimit = 2, 3
	bucketRate, bucketBurst  = 2, 3
	// cacheTTL is the cached values' ttl: longer than a run and any clock
	// skew, so a value leaves the file only by an invalidation (Del) or a
	// power loss.
	cacheTTL = 24 * time.Hour
	// fn sleeps up to fnSleepShortMillis of true time, one time in three
	// up to fnSleepMaxMillis; leases last cacheLeaseLong plus up to
	// cacheLeaseLongSpan ms, one time in three cacheLeaseMin plus up to
	// cacheLeaseSpan ms, so some fills outrun their lease and another
	// caller takes over.
	fnSleepShortMillis, fnSleepMaxMillis = 200, 3000
	cacheLeaseMin, cacheLeaseSpan        = 300, 1000
	cacheLeaseLong                       = 5 * time.Second
	cacheLeaseLongSpan                   = 10_000
	cacheMaxWait                         = 10 * time.Second
	recipeKeyA, recipeKeyB               = "a", "b"
	fixedPrefix, slidingPrefix           = "rl:f:", "rl:s:"
	bucketPrefix, cacheValuePrefix       = "rl:b:", "cache-"
)

// The limiters, by index.
const (
	limFixed = iota
	limSliding
	limBucket
	limKinds
)

var limNames = [limKinds]string{"fixed", "sliding", "bucket"}

// recipeState is what the recipe workload did, for its checks.
type recipeState struct {
	rng       *rand.Rand
	decisions []decision
	deletions []recipeDeletion
	fills     []cacheFill
	gets      []cacheGet
	produced  map[string]int // fn's value -> index in fills
}

// decision is one limiter decision that answered.
type decision struct {
	lim       int
	key       string
	n         int64
	nowNanos  int64 // the engine time it decided by (its transaction's, or db.Now() before a single Incr)
	verbMilli int64 // the engine time its verb ran at, as the engine claimed it
	call, ret int64 // events
	allowed   bool
}

// recipeDeletion is a sweep that deleted, or may have deleted, recipe
// keys: keys nil means its outcome is unknown and it may have deleted any
// key whose deadline was at or before cutoff (engine ms).
type recipeDeletion struct {
	keys      []string
	cutoff    int64
	call, ret int64
}

// cacheFill is one run of a cache fill's fn: its value, the token of the
// lease it ran under, and the event it began at.
type cacheFill struct {
	key, value string
	token      int64
	at         int64
}

// cacheGet is one GetOrCompute that answered.
type cacheGet struct {
	key, value string
	own        bool // its own fn produced the value
	call, ret  int64
	pid        int
}

func newRecipeState(seed uint64) *recipeState {
	return &recipeState{rng: rand.New(rand.NewPCG(seed, streamRecipe)), produced: map[string]int{}}
}

// recipeTurn draws whether a client's next operation is a recipe's.
func (w *world) recipeTurn() bool { return w.recipes.rng.IntN(recipeOneIn) == 0 }

// recipeOp has client c of p make one recipe call: a limiter decision, a
// cache read-through, or an invalidation of a cached value.
func (w *world) recipeOp(t *thread, p *process, c *client) {
	r := w.recipes.rng
	key := recipeKeyA
	if r.IntN(4) == 0 {
		key = recipeKeyB
	}
	switch x := r.IntN(10); {
	case x < 6:
		n := int64(1)
		if r.IntN(5) == 0 {
			n = 2
		}
		w.decide(t, p, r.IntN(limKinds), key, n)
	case x < 9:
		w.cacheGet(t, p, c, key)
	default:
		before := w.mark()
		n, err := p.db.Del(w.observe(p, nil), cacheValuePrefix+key)
		w.logf("p%d cache invalidate %q: %d, %s", p.pid, key, n, errClass(err))
		if err != nil && w.classify(p, "cache invalidate", err, before) == failDead {
			w.stopOn(t, p, "handle failed")
		}
	}
}

// limiter builds limiter lim on p's handle.
func (w *world) limiter(p *process, lim int) (ratelimit.Limiter, error) {
	switch lim {
	case limFixed:
		return ratelimit.NewFixedWindow(p.db, fixedLimit, recipeWindow, ratelimit.WithPrefix(fixedPrefix))
	case limSliding:
		return ratelimit.NewSlidingWindow(p.db, slidingLimit, recipeWindow, ratelimit.WithPrefix(slidingPrefix))
	}
	return ratelimit.NewTokenBucket(p.db, bucketRate, recipeWindow, ratelimit.WithBurst(bucketBurst), ratelimit.WithPrefix(bucketPrefix))
}

// decide has a client of p ask limiter lim for n under key.
func (w *world) decide(t *thread, p *process, lim int, key string, n int64) {
	l, err := w.limiter(p, lim)
	if err != nil {
		panic("sim: " + err.Error())
	}
	d := decision{lim: lim, key: key, n: n}
	h := &recipehooks.Hooks{Bugs: w.cfg.Bugs, Decided: func(ns int64) { d.nowNanos = ns }}
	ctx := hooks.WithNow(recipehooks.With(w.ctx, h), func(ms int64) { d.verbMilli = ms })
	before := w.mark()
	d.call = w.tick()
	dec, err := l.AllowN(ctx, key, n)
	if w.tearing {
		return
	}
	if err != nil {
		w.logf("p%d %s %q n=%d: %s", p.pid, limNames[lim], key, n, errClass(err))
		if errors.Is(err, ratelimit.ErrBadState) {
			w.violate(CheckRateLimit, "p%d %s %q: %v", p.pid, limNames[lim], key, err)
			return
		}
		if w.classify(p, limNames[lim], err, before) == failDead {
			w.stopOn(t, p, "handle failed")
		}
		return
	}
	d.ret, d.allowed = w.tick(), dec.Allowed
	w.recipes.decisions = append(w.recipes.decisions, d)
	w.logf("p%d %s %q n=%d @%d verb@%d: allowed=%t remaining=%d", p.pid, limNames[lim], key, n,
		d.nowNanos/int64(time.Millisecond), d.verbMilli, dec.Allowed, dec.Remaining)
}

// cacheGet has client c of p read key through the cache; its fn records
// that it ran, sleeps a while of true time, and returns a value no other
// fn returns.
func (w *world) cacheGet(t *thread, p *process, c *client, key string) {
	r := w.recipes.rng
	lease := time.Duration(cacheLeaseMin+r.IntN(cacheLeaseSpan)) * time.Millisecond
	if r.IntN(3) != 0 {
		lease = cacheLeaseLong + time.Duration(r.IntN(cacheLeaseLongSpan))*time.Millisecond
	}
	nap := time.Duration(r.IntN(fnSleepShortMillis)) * time.Millisecond
	if r.IntN(3) == 0 {
		nap = time.Duration(r.IntN(fnSleepMaxMillis)) * time.Millisecond
	}
	var token int64
	var value string
	h := &recipehooks.Hooks{
		Bugs:    w.cfg.Bugs,
		Owner:   fmt.Sprintf("c%d#%d", c.id, w.events),
		Granted: func(tok int64) { token = tok },
		Sleep: func(ctx context.Context, d time.Duration) error {
			w.sched.sleep(d, nil)
			return ctx.Err()
		},
	}
	fn := func(context.Context) ([]byte, error) {
		value = fmt.Sprintf("%s:p%d:c%d:%d", key, p.pid, c.id, w.tick())
		if !w.tearing {
			w.recipes.produced[value] = len(w.recipes.fills)
			w.recipes.fills = append(w.recipes.fills, cacheFill{key: key, value: value, token: token, at: w.events})
			w.logf("p%d cache fill %q under token %d: fn runs for %v", p.pid, key, token, nap)
		}
		w.sched.sleep(nap, nil)
		return []byte(value), nil
	}
	before := w.mark()
	g := cacheGet{key: key, call: w.tick(), pid: p.pid}
	v, err := cache.GetOrCompute(recipehooks.With(w.ctx, h), p.db, cacheValuePrefix+key, cacheTTL, fn,
		cache.WithLease(lease), cache.WithMaxWait(cacheMaxWait))
	if w.tearing {
		return
	}
	if err != nil {
		w.logf("p%d cache get %q: %s", p.pid, key, errClass(err))
		switch {
		case errors.Is(err, cache.ErrWaitTimeout):
		case errors.Is(err, cache.ErrNotBytes):
			w.violate(CheckCache, "p%d cache get %q: %v", p.pid, key, err)
		default:
			if w.classify(p, "cache get", err, before) == failDead {
				w.stopOn(t, p, "handle failed")
			}
		}
		return
	}
	g.ret, g.value = w.tick(), string(v)
	g.own = value != "" && g.value == value
	w.recipes.gets = append(w.recipes.gets, g)
	w.logf("p%d cache get %q: %q own=%t", p.pid, key, g.value, g.own)
}

// recipeSwept notes a sweep statement's deletions of recipe keys: keys
// (nil when its outcome is unknown) at cutoff, called and returned at
// events call and ret.
func (w *world) recipeSwept(keys []string, cutoff, call, ret int64) {
	if keys != nil {
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !strings.HasPrefix(k, "rl:") })
		if len(keys) == 0 {
			return
		}
	}
	w.recipes.deletions = append(w.recipes.deletions, recipeDeletion{keys: keys, cutoff: cutoff, call: call, ret: ret})
}

// checkRecipes runs the recipe checks after a complete run.
func (w *world) checkRecipes() {
	var losses []int64
	for _, op := range w.history {
		if op.Event == linearizability.PowerLoss {
			losses = append(losses, op.Call)
		}
	}
	epoch := func(at int64) int {
		i, _ := slices.BinarySearch(losses, at)
		return i
	}
	w.checkLimits(epoch)
	w.checkCache(epoch)
}

// The limiters' promises, as checkLimits holds them. Each holds between
// two resets of the limiter's state: a power loss (which may take back
// NORMAL commits, so a limiter may allow again what it had allowed), and
// the early loss of one of its rows, which the limiter keeps a window (the
// bucket: a capacity) past the time it needs it, so that it happens only
// when a process whose engine time is that far ahead of the deciding one
// sweeps the row (a wall-clock step between their starts). The simulator
// sees every sweep's deletions; a sweep whose outcome is unknown counts as
// one of every row it could have deleted. A decision whose verb ran long
// after the time it decided by is no excuse: each limiter decides by its
// transaction's time, or (a fixed window's single Incr) decides again when
// its Incr may have run past the row's guaranteed life. A decision that ran
// beside a reset is not counted on either side of it: a power loss that
// processes lived through (a failed sync's writes dropped, with
// -dropfailedsyncs) can come while a decision is in flight. Within one span:
//
//   - fixed window: per key and window (placed by the time each decision
//     decided by), the requests allowed total at most the limit;
//   - sliding window: the same per window, and each allowed request of n at
//     fraction f into its window fits: prev*(1-f) + cur + n <= limit, where
//     prev and cur count the requests allowed in the previous and the
//     current window that returned before it was called;
//   - token bucket: over any span of decision times [t1, t2], the tokens
//     allowed total at most burst + (t2-t1)/interval.
func (w *world) checkLimits(epoch func(int64) int) {
	win := int64(recipeWindow)
	winMillis := recipeWindow.Milliseconds()
	// units: a fixed or sliding window's row (its key name), or a bucket's.
	type unitKey struct {
		lim int
		key string
		idx int64
	}
	// resets of each unit: [call, ret] event spans.
	resets := map[unitKey][][2]int64{}
	addReset := func(u unitKey, call, ret int64) { resets[u] = append(resets[u], [2]int64{call, ret}) }
	units := map[unitKey]bool{}
	for _, d := range w.recipes.decisions {
		idx := d.nowNanos / win
		switch d.lim {
		case limFixed:
			units[unitKey{limFixed, d.key, idx}] = true
		case limSliding:
			units[unitKey{limSliding, d.key, idx}] = true
			units[unitKey{limSliding, d.key, idx - 1}] = true
		default:
			units[unitKey{limBucket, d.key, 0}] = true
		}
	}
	rowOf := func(u unitKey) string {
		switch u.lim {
		case limFixed:
			return fixedPrefix + u.key + ":" + strconv.FormatInt(u.idx, 10)
		case limSliding:
			return slidingPrefix + u.key + ":" + strconv.FormatInt(u.idx, 10)
		}
		return bucketPrefix + u.key
	}
	// The earliest a unit's row can expire (engine ms): a window's row
	// outlives the last window that reads it by a window; a bucket's row
	// has no such bound here.
	lifeOf := func(u unitKey) int64 {
		switch u.lim {
		case limFixed:
			return (u.idx + 2) * winMillis
		case limSliding:
			return (u.idx + 3) * winMillis
		}
		return 0
	}
	for u := range units {
		row := rowOf(u)
		for _, del := range w.recipes.deletions {
			if (del.keys == nil && del.cutoff >= lifeOf(u)) || slices.Contains(del.keys, row) {
				addReset(u, del.call, del.ret)
			}
		}
	}
	// span returns the span of unit u decision d lies in, or false if it
	// ran beside a reset: a power loss the processes lived through (a
	// failed sync's writes dropped) while it was in flight, or a deletion
	// of the unit's row.
	type spanID struct{ epoch, resets int }
	span := func(u unitKey, d decision) (spanID, bool) {
		s := spanID{epoch: epoch(d.call)}
		if epoch(d.ret) != s.epoch {
			return s, false
		}
		for _, r := range resets[u] {
			switch {
			case r[1] < d.call:
				s.resets++
			case r[0] > d.ret:
			default:
				return s, false
			}
		}
		return s, true
	}
	// Per window: the total allowed in each span.
	totals := map[unitKey]map[spanID]int64{}
	var bucketAllowed = map[unitKey]map[spanID][]decision{}
	for _, d := range w.recipes.decisions {
		if !d.allowed {
			continue
		}
		u := unitKey{d.lim, d.key, d.nowNanos / win}
		if d.lim == limBucket {
			u.idx = 0
		}
		s, ok := span(u, d)
		if !ok {
			continue
		}
		if d.lim == limBucket {
			if bucketAllowed[u] == nil {
				bucketAllowed[u] = map[spanID][]decision{}
			}
			bucketAllowed[u][s] = append(bucketAllowed[u][s], d)
			continue
		}
		if totals[u] == nil {
			totals[u] = map[spanID]int64{}
		}
		totals[u][s] += d.n
		limit := int64(fixedLimit)
		if d.lim == limSliding {
			limit = slidingLimit
		}
		if totals[u][s] > limit && totals[u][s]-d.n <= limit { // once per span
			w.violate(CheckRateLimit, "%s limiter, key %q, window %d: allowed %d of a limit of %d within one span (epoch %d, after %d resets)",
				limNames[d.lim], d.key, u.idx, totals[u][s], limit, s.epoch, s.resets)
		}
	}
	// Sliding: each allowed decision's weighted count.
	for _, d := range w.recipes.decisions {
		if !d.allowed || d.lim != limSliding {
			continue
		}
		idx := d.nowNanos / win
		cur, prev := unitKey{limSliding, d.key, idx}, unitKey{limSliding, d.key, idx - 1}
		sc, ok1 := span(cur, d)
		sp, ok2 := span(prev, d)
		if !ok1 || !ok2 {
			continue
		}
		var c, p int64
		for _, e := range w.recipes.decisions {
			if !e.allowed || e.lim != limSliding || e.key != d.key || e.ret >= d.call {
				continue
			}
			switch e.nowNanos / win {
			case idx:
				if s, ok := span(cur, e); ok && s == sc {
					c += e.n
				}
			case idx - 1:
				if s, ok := span(prev, e); ok && s == sp {
					p += e.n
				}
			}
		}
		into := d.nowNanos - idx*win
		if p*(win-into)+(c+d.n)*win > slidingLimit*win {
			w.violate(CheckRateLimit, "sliding limiter, key %q: allowed %d at %.3f into window %d with %d allowed before it in that window and %d in the previous: weighted %.3f + %d > %d",
				d.key, d.n, float64(into)/float64(win), idx, c, p, float64(p)*float64(win-into)/float64(win), c+d.n, slidingLimit)
		}
	}
	// Bucket: over any span of decision times.
	interval := int64(recipeWindow) / bucketRate
	tau := interval * bucketBurst
	// In a fixed order (units, then spans, sorted), so a failing seed
	// reports the same violation every time.
	bucketUnits := make([]unitKey, 0, len(bucketAllowed))
	for u := range bucketAllowed {
		bucketUnits = append(bucketUnits, u)
	}
	slices.SortFunc(bucketUnits, func(a, b unitKey) int {
		return cmp.Or(cmp.Compare(a.lim, b.lim), cmp.Compare(a.key, b.key), cmp.Compare(a.idx, b.idx))
	})
	for _, u := range bucketUnits {
		spans := bucketAllowed[u]
		ids := make([]spanID, 0, len(spans))
		for id := range spans {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b spanID) int {
			return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.resets, b.resets))
		})
		for _, id := range ids {
			ds := spans[id]
			slices.SortStableFunc(ds, func(a, b decision) int { return cmp.Compare(a.nowNanos, b.nowNanos) })
			for i := range ds {
				tokens := int64(0)
				for k := i; k < len(ds); k++ {
					tokens += ds[k].n
					if tokens*interval > tau+ds[k].nowNanos-ds[i].nowNanos {
						w.violate(CheckRateLimit, "token bucket, key %q: allowed %d tokens decided within %v, more than a burst of %d and a token per %v",
							u.key, tokens, time.Duration(ds[k].nowNanos-ds[i].nowNanos), bucketBurst, time.Duration(interval))
						return
					}
				}
			}
		}
	}
}

// checkCache holds the cache's promises:
//
//   - a caller returns only a value some fn produced for its key;
//   - a fill whose lease was taken over never writes: once the caller
//     granted token t2 has run fn (so it found no value after its grant),
//     no value of a fill under a lower token is read from the file by a
//     call that began after, unless a power loss came between (it may
//     take back an invalidation). Values live a day, so nothing but an
//     invalidation or a power loss takes one away in a run.
func (w *world) checkCache(epoch func(int64) int) {
	for _, g := range w.recipes.gets {
		i, ok := w.recipes.produced[g.value]
		if !ok || w.recipes.fills[i].key != g.key {
			w.violate(CheckCache, "p%d read %q through the cache and got %q, which no fn of that key produced", g.pid, g.key, g.value)
			continue
		}
		if g.own {
			continue
		}
		f1 := w.recipes.fills[i]
		for _, f2 := range w.recipes.fills {
			if f2.key == g.key && f2.token > f1.token && f2.at < g.call && epoch(f2.at) == epoch(g.ret) {
				w.violate(CheckCache, "p%d read %q and got %q, written by the fill under token %d after the fill under token %d had run fn (its lease was lost, yet it wrote)",
					g.pid, g.key, g.value, f1.token, f2.token)
				break
			}
		}
	}
}
