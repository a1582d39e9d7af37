package checks

import (
	"maps"
	"slices"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// increment is one increment of a counter key a history shows.
type increment struct {
	index        int // op index in the history
	client       int
	delta        int64
	call, ret    int64
	acknowledged bool  // known to have applied
	maybe        bool  // may have applied (acknowledged, or unknown)
	answer       int64 // the value an acknowledged IncrBy answered
	answered     bool  // answer is set: a plain IncrBy, not a flush
}

// Counter checks a counter key: one that only increments touch (IncrBy,
// alone or inside an Update, and the IncrBy parts of buffered-increment
// Flushes), each adding zero or more. final is the key's value read after
// the history (0 when absent). The checks:
//
//   - final is at least every acknowledged increment that survives: those
//     after the last power loss, and those a durable point (a FULL commit
//     that certainly wrote, or a Durable event) that began after they
//     returned made durable before the next power loss;
//   - final is at most every increment that may have applied (acknowledged
//     or unknown);
//   - acknowledged IncrBy of more than zero between two power losses
//     answered distinct values, and those after the last power loss
//     answered at most final.
//
// A read of key (Get or TTL, alone) changes nothing and is let through:
// the linearizability check holds its answer. Any other verb on key, or a
// negative delta, is a violation: the bounds would mean nothing.
func Counter(history []linearizability.Op, key string, final int64) []Violation {
	var out []Violation
	var powerLosses []int64
	for _, op := range history {
		if op.Event == linearizability.PowerLoss {
			powerLosses = append(powerLosses, op.Call)
		}
	}
	slices.Sort(powerLosses)
	era := func(t int64) int { // power losses at or before t
		n, _ := slices.BinarySearch(powerLosses, t+1)
		return n
	}
	lastEra := len(powerLosses)
	// latestDurable[e] is the latest call time of a durable point in era e.
	latestDurable := map[int]int64{}
	noteDurable := func(call int64) {
		e := era(call)
		if d, ok := latestDurable[e]; !ok || call > d {
			latestDurable[e] = call
		}
	}

	var incs []increment
	for i, op := range history {
		switch op.Event {
		case linearizability.Durable:
			noteDurable(op.Call)
			continue
		case linearizability.Verb:
		default:
			continue
		}
		if !op.Unknown && op.Durability == linearizability.Full && linearizability.CertainWrite(op.Input, op.Output) {
			noteDurable(op.Call)
		}
		in, o := op.Input, op.Output
		base := increment{index: i, client: op.Client, call: op.Call, ret: op.Return}
		switch in.Kind {
		case model.IncrBy:
			if in.Key != key {
				continue
			}
			inc := base
			inc.delta = in.Delta
			inc.maybe = op.Unknown || o.Err == model.ErrNone
			inc.acknowledged = !op.Unknown && o.Err == model.ErrNone
			inc.answer, inc.answered = o.Int, inc.acknowledged
			incs = append(incs, inc)
		case model.Update, model.Flush:
			committed := op.Unknown || (in.Kind == model.Flush || o.Err == model.ErrNone)
			for j, sub := range in.Ops {
				if !touches(sub, key) {
					continue
				}
				if sub.Kind != model.IncrBy {
					out = append(out, violation(KindCounter, "counter %q is touched by %s (op #%d), not only by increments", key, sub.Kind, i))
					continue
				}
				inc := base
				inc.delta = sub.Delta
				var subOut model.Output
				if j < len(o.Sub) {
					subOut = o.Sub[j]
				}
				inc.maybe = committed && (op.Unknown || subOut.Err == model.ErrNone)
				inc.acknowledged = !op.Unknown && committed && j < len(o.Sub) && subOut.Err == model.ErrNone
				if in.Kind == model.Update && inc.acknowledged {
					inc.answer, inc.answered = subOut.Int, true
				}
				incs = append(incs, inc)
			}
		case model.Get, model.TTL, model.Scan, model.Leases:
			continue // a read: it changes nothing
		default:
			if touches(in, key) {
				out = append(out, violation(KindCounter, "counter %q is touched by %s (op #%d), not only by increments", key, in.Kind, i))
			}
		}
	}

	var lo, hi int64
	answers := map[[2]int64]int{} // (era, value) -> op index
	for _, inc := range incs {
		if inc.delta < 0 {
			out = append(out, violation(KindCounter, "counter %q: op #%d adds %d, but a counter's increments must add zero or more", key, inc.index, inc.delta))
			continue
		}
		if inc.maybe {
			hi += inc.delta
		}
		if !inc.acknowledged {
			continue
		}
		e := era(inc.call)
		if d, ok := latestDurable[e]; e == lastEra || (ok && d > inc.ret) {
			lo += inc.delta
		}
		if !inc.answered || inc.delta == 0 {
			continue
		}
		if j, dup := answers[[2]int64{int64(e), inc.answer}]; dup {
			out = append(out, violation(KindCounter, "counter %q: ops #%d and #%d both answered %d", key, j, inc.index, inc.answer))
		}
		answers[[2]int64{int64(e), inc.answer}] = inc.index
		if e == lastEra && inc.answer > final {
			out = append(out, violation(KindCounter, "counter %q: op #%d (client %d) answered %d, above the final value %d", key, inc.index, inc.client, inc.answer, final))
		}
	}
	if final < lo || final > hi {
		out = append(out, violation(KindCounter, "counter %q ended at %d; want %d..%d (increments acknowledged and surviving, and every increment that may have applied)", key, final, lo, hi))
	}
	return out
}

// touches reports whether in names key (as a key, not a lease).
func touches(in model.Input, key string) bool {
	if in.Kind.IsLease() {
		return false
	}
	if in.Key == key || slices.Contains(in.Keys, key) {
		return true
	}
	for _, sub := range in.Ops {
		if touches(sub, key) {
			return true
		}
	}
	return false
}

// Buffered checks one handle's buffered increments: buffered is what its
// callers added with IncrBuffered, key by key (each delta zero or more);
// taken is what its flushes took from the buffer, as the Flush ops
// recorded for it show (FlushTaken), a flush whose deltas went back into
// the buffer not counted. When the handle was closed cleanly (Close
// flushes what is left) taken must equal buffered; after a crash, which
// loses what was still buffered, taken may be less but never more.
func Buffered(handle string, buffered, taken map[string]int64, closedCleanly bool) []Violation {
	var out []Violation
	keys := slices.Collect(maps.Keys(buffered))
	for k := range taken {
		if _, ok := buffered[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b, t := buffered[k], taken[k]
		switch {
		case t > b:
			out = append(out, violation(KindBuffered, "%s: flushes took %d for %q, more than the %d its callers buffered", handle, t, k, b))
		case closedCleanly && t != b:
			out = append(out, violation(KindBuffered, "%s closed cleanly, but its flushes took %d for %q of the %d its callers buffered", handle, t, k, b))
		}
	}
	return out
}

// FlushTaken sums, key by key, the deltas of the Flush ops of history whose
// client is in clients: what those flushes took from a buffer. A Flush
// recorded with no Ops took nothing (its deltas went back).
func FlushTaken(history []linearizability.Op, clients func(client int) bool) map[string]int64 {
	taken := map[string]int64{}
	for _, op := range history {
		if op.Event != linearizability.Verb || op.Input.Kind != model.Flush || !clients(op.Client) {
			continue
		}
		for _, sub := range op.Input.Ops {
			taken[sub.Key] += sub.Delta
		}
	}
	return taken
}
