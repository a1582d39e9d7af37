package sim

import (
	"errors"
	"strconv"
	"strings"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// hitsKey is the counter only increments touch: the counter check reads it
// at the end.
const hitsKey = "hits"

// opKind is what a client does in one step.
type opKind int

const (
	opGet opKind = iota
	opSet
	opDel
	opIncr
	opDecr
	opCAS
	opExpire
	opTTL
	opHits
	opBuffered
	opLease
	opRenew
	opRelease
	opFence
	opUpdate
	opFlush
	opSweep
	opKinds
)

// opWeights is how often clients pick each step, out of their sum.
var opWeights = [opKinds]int{
	opGet: 14, opSet: 12, opDel: 4, opIncr: 10, opDecr: 5, opCAS: 9, opExpire: 6, opTTL: 8,
	opHits: 5, opBuffered: 7, opLease: 9, opRenew: 5, opRelease: 4, opFence: 6, opUpdate: 7,
	opFlush: 3, opSweep: 2,
}

// subKinds are the verbs an Update runs.
var subKinds = []opKind{opGet, opSet, opDel, opIncr, opDecr, opCAS, opExpire, opTTL, opLease, opRenew, opRelease}

// Bounds of the workload's draws.
const (
	updateOpsMax     = 4
	delKeysMax       = 3
	bigValueBytesMax = 6000
	leaseTTLMin      = 20
	leaseTTLSpan     = 1500
	focusOps         = 3
)

// pickKind draws a step by opWeights.
func (w *world) pickKind() opKind {
	total := 0
	for _, n := range opWeights {
		total += n
	}
	x := w.rngWork.IntN(total)
	for k, n := range opWeights {
		if x < n {
			return opKind(k)
		}
		x -= n
	}
	panic("sim: opWeights")
}

// clientLoop is the life of client c of p: it waits for the simulator to
// let one call begin, and makes it, until its process stops.
func (w *world) clientLoop(t *thread, p *process, c *client) {
	for {
		w.sched.park(func() bool { return p.stopping || w.ticketFor(p) }, 0)
		if p.stopping {
			return
		}
		w.tickets--
		w.stats.Ops++
		w.clientOp(t, p, c)
	}
}

// ticketFor reports whether a client of p may begin a call now.
func (w *world) ticketFor(p *process) bool {
	return w.tickets > 0 && (w.probe == nil || w.probe.p == p)
}

// clientOp has client c of p make one call.
func (w *world) clientOp(t *thread, p *process, c *client) {
	if pr := w.probe; pr != nil && pr.p == p {
		w.probe = nil
		w.runProbe(t, p, c, pr)
		return
	}
	if w.recipeTurn() {
		w.recipeOp(t, p, c)
		return
	}
	if w.transferTurn() {
		w.transferOp(t, p, c)
		return
	}
	if w.groupTurn() {
		w.groupOp(t, p, c)
		return
	}
	r := w.rngWork
	kind := w.pickKind()
	if w.diskFull > 0 && r.IntN(2) == 0 {
		// While the disk is full, flushes fail and put their deltas back
		// while other clients buffer more: favour that.
		kind = []opKind{opBuffered, opBuffered, opFlush}[r.IntN(3)]
	}
	switch kind {
	case opHits:
		w.verb(t, p, c.id, &model.Input{Kind: model.IncrBy, Key: hitsKey, Delta: 1})
	case opBuffered:
		w.buffered(t, p)
	case opFlush:
		w.flush(t, p)
	case opSweep:
		w.sweep(t, p)
	case opLease, opRenew, opRelease:
		li := r.IntN(len(w.leases))
		if held := c.held(); kind != opLease && len(held) > 0 && r.IntN(4) != 0 {
			li = held[r.IntN(len(held))] // renewals and releases that succeed, not only guesses
		}
		in := w.leaseInput(c, kind, li)
		out, known := w.verb(t, p, c.id, &in)
		w.leaseOutcome(c, li, in, out, known)
	case opFence:
		li := r.IntN(len(w.leases))
		if !c.holds[li].ok {
			in := w.kvInput(opGet)
			w.verb(t, p, c.id, &in)
			return
		}
		w.fenceWrite(c, li)
	case opUpdate:
		w.update(t, p, c)
	default:
		in := w.kvInput(kind)
		out, known := w.verb(t, p, c.id, &in)
		if known {
			w.noteKVDeadline(in, out)
		}
	}
}

// buffered adds to p's buffered increments, mostly on the counter key.
func (w *world) buffered(t *thread, p *process) {
	r := w.rngWork
	key, delta := hitsKey, int64(1)
	if r.IntN(2) == 0 {
		key, delta = w.key(), int64(r.IntN(7)-3)
	}
	before := w.mark()
	if err := p.db.IncrBuffered(key, delta); err != nil {
		w.logf("p%d incrbuffered(%q, %+d): %s", p.pid, key, delta, errClass(err))
		if w.classify(p, "incrbuffered", err, before) == failDead {
			w.stopOn(t, p, "handle failed")
		}
		return
	}
	p.buffered[key] += delta
	w.logf("p%d incrbuffered(%q, %+d)", p.pid, key, delta)
}

// flush has a client call Flush; the flush observer records what it wrote.
func (w *world) flush(t *thread, p *process) {
	before := w.mark()
	t.own = checks.OwnFlush{}
	err := p.db.Flush(w.ctx)
	w.logf("p%d flush: %s", p.pid, errClass(err))
	w.flushAnswer(t, p, err, false)
	var fe *state.FlushError
	if err != nil && !errors.As(err, &fe) && w.classify(p, "flush", err, before) == failDead {
		w.stopOn(t, p, "handle failed")
	}
}

// sweep has a client call Sweep; the sweep observer records each of its
// statements, as it records the engine's own sweeps (background, and
// inline after writes).
func (w *world) sweep(t *thread, p *process) {
	before := w.mark()
	t.swept = 0
	n, err := p.db.Sweep(w.observe(p, nil))
	w.logf("p%d sweep: %d, %s", p.pid, n, errClass(err))
	if err == nil && n != t.swept {
		w.violate(CheckSweepCount, "p%d: Sweep returned %d, but its statements deleted %d keys", p.pid, n, t.swept)
	}
	if err != nil && w.classify(p, "sweep", err, before) == failDead {
		w.stopOn(t, p, "handle failed")
	}
}

// update runs an Update of a few verbs, some of them on leases.
func (w *world) update(t *thread, p *process, c *client) {
	r := w.rngWork
	in := model.Input{Kind: model.Update, Abort: r.IntN(7) == 0}
	leaseOf := map[int]int{} // sub index -> lease index
	for i := range 1 + r.IntN(updateOpsMax) {
		kind := subKinds[r.IntN(len(subKinds))]
		switch kind {
		case opLease, opRenew, opRelease:
			li := r.IntN(len(w.leases))
			leaseOf[i] = li
			in.Ops = append(in.Ops, w.leaseInput(c, kind, li))
		default:
			in.Ops = append(in.Ops, w.kvInput(kind))
		}
	}
	out, known := w.verb(t, p, c.id, &in)
	for i, sub := range in.Ops {
		li, ok := leaseOf[i]
		if !ok {
			continue
		}
		switch {
		case !known:
			c.holds[li] = hold{}
		case out.Err == model.ErrNone:
			sub.NowMillis = in.NowMillis
			w.leaseOutcome(c, li, sub, out.Sub[i], true)
		}
	}
	if known && out.Err == model.ErrNone {
		for i, sub := range in.Ops {
			if _, isLease := leaseOf[i]; !isLease {
				sub.NowMillis = in.NowMillis
				w.noteKVDeadline(sub, out.Sub[i])
			}
		}
	}
}

// kvInput draws a call of a key verb.
func (w *world) kvInput(kind opKind) model.Input {
	r := w.rngWork
	switch kind {
	case opGet:
		return model.Input{Kind: model.Get, Key: w.key()}
	case opSet:
		return model.Input{Kind: model.Set, Key: w.key(), Value: w.value(true), TTLMillis: w.ttl()}
	case opDel:
		keys := make([]string, 1+r.IntN(delKeysMax))
		for i := range keys {
			keys[i] = w.key()
		}
		return model.Input{Kind: model.Del, Keys: keys}
	case opIncr:
		return model.Input{Kind: model.IncrBy, Key: w.key(), Delta: int64(1 + r.IntN(3)), TTLMillis: w.ttl()}
	case opDecr:
		return model.Input{Kind: model.IncrBy, Key: w.key(), Delta: -int64(1 + r.IntN(3)), TTLMillis: w.ttl()}
	case opCAS:
		in := model.Input{Kind: model.CAS, Key: w.key()}
		if r.IntN(4) != 0 {
			in.Expected = model.Ptr(w.value(false))
			if v, ok := w.seen[in.Key]; ok && r.IntN(2) == 0 {
				// The value the key was last seen to hold, so that
				// swaps happen, of a key with a deadline too, and not
				// only by the luck of a random guess.
				in.Expected = model.Ptr(v)
			}
		}
		if r.IntN(5) != 0 {
			in.New = model.Ptr(w.value(false))
			if r.IntN(3) == 0 {
				in.TTLMillis = w.ttl() // SET NX PX, or a swap that sets a deadline
			}
		}
		return in
	case opExpire:
		ttl := w.ttl()
		switch {
		case r.IntN(7) == 0:
			ttl = -int64(r.IntN(2)) // deletes
		case ttl == 0:
			ttl = 1 + int64(r.IntN(20))
		}
		return model.Input{Kind: model.Expire, Key: w.key(), TTLMillis: ttl}
	case opTTL:
		return model.Input{Kind: model.TTL, Key: w.key()}
	}
	panic("sim: kvInput of " + strconv.Itoa(int(kind)))
}

// noteKVDeadline remembers the deadline a key verb set, or read, and the
// value it wrote or read (for CAS's expected values).
func (w *world) noteKVDeadline(in model.Input, out model.Output) {
	if out.Err != model.ErrNone {
		return
	}
	switch {
	case in.Kind == model.Get:
		w.seen[in.Key] = out.Value
	case in.Kind == model.Set:
		w.seen[in.Key] = in.Value
	case in.Kind == model.CAS && out.OK && in.New != nil:
		w.seen[in.Key] = *in.New
	}
	switch in.Kind {
	case model.Set, model.IncrBy:
		if in.TTLMillis > 0 {
			w.noteDeadline(in.NowMillis+in.TTLMillis, in.Key, false)
		}
	case model.Expire, model.CAS:
		if out.OK && in.TTLMillis > 0 {
			w.noteDeadline(in.NowMillis+in.TTLMillis, in.Key, false)
		}
	case model.TTL:
		if out.TTLMillis > 0 {
			w.noteDeadline(in.NowMillis+out.TTLMillis, in.Key, false)
		}
	}
}

// key draws a shared key, favouring the focus key for a few calls after
// time stopped at its deadline.
func (w *world) key() string {
	r := w.rngWork
	focus := r.IntN(10) < 7
	k := w.keys[r.IntN(len(w.keys))]
	if w.focusLeft > 0 {
		w.focusLeft--
		if focus {
			return w.focusKey
		}
	}
	return k
}

// value draws a value: small integers and their decimal text (so that int
// 7 and "7" meet), short words, and, when big allows, now and then a value
// large enough to spill onto overflow pages.
func (w *world) value(big bool) model.Value {
	r := w.rngWork
	switch x := r.IntN(20); {
	case x < 10:
		return model.Int(int64(r.IntN(7) - 3))
	case x < 16:
		return model.Bytes(strconv.Itoa(r.IntN(4)))
	case x < 19 || !big:
		return model.Bytes([]string{"x", "y", ""}[r.IntN(3)])
	}
	return model.Bytes(strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(bigValueBytesMax)))
}

// ttl draws a TTL in ms for Set and IncrBy: none (0) or short to a few
// seconds.
func (w *world) ttl() int64 {
	r := w.rngWork
	switch x := r.IntN(20); {
	case x < 8:
		return 0
	case x < 12:
		return 1 + int64(r.IntN(20))
	case x < 17:
		return 20 + int64(r.IntN(480))
	}
	return 500 + int64(r.IntN(4500))
}

// leaseInput draws a call of a lease verb on lease li by client c: with the
// token it holds, or now and then a stale or guessed one.
func (w *world) leaseInput(c *client, kind opKind, li int) model.Input {
	r := w.rngWork
	name := w.leases[li]
	ttl := leaseTTLMin + int64(r.IntN(leaseTTLSpan))
	if kind == opLease {
		return model.Input{Kind: model.Lease, Key: name, Owner: c.owner, TTLMillis: ttl}
	}
	h := c.holds[li]
	token := h.token
	guess := max(1, w.topToken[li]+int64(r.IntN(3)-1))
	if !h.ok || r.IntN(8) == 0 {
		token = guess
	}
	if kind == opRenew {
		return model.Input{Kind: model.Renew, Key: name, Owner: c.owner, Token: token, TTLMillis: ttl}
	}
	return model.Input{Kind: model.Release, Key: name, Owner: c.owner, Token: token}
}

// leaseOutcome updates what client c believes it holds after a lease verb.
func (w *world) leaseOutcome(c *client, li int, in model.Input, out model.Output, known bool) {
	h := &c.holds[li]
	if !known {
		*h = hold{}
		return
	}
	switch in.Kind {
	case model.Lease:
		if out.Err != model.ErrNone {
			*h = hold{}
			return
		}
		*h = hold{ok: true, token: out.Token, expires: out.ExpiresAt}
		w.topToken[li] = max(w.topToken[li], out.Token)
		w.noteDeadline(out.ExpiresAt, in.Key, true)
	case model.Renew:
		switch {
		case out.Err == model.ErrNone:
			*h = hold{ok: true, token: in.Token, expires: out.ExpiresAt}
			w.noteDeadline(out.ExpiresAt, in.Key, true)
		case in.Token == h.token:
			*h = hold{}
		}
	case model.Release:
		if out.Err == model.ErrNone || in.Token == h.token {
			*h = hold{}
		}
	}
}
