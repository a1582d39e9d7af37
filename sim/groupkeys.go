package sim

import (
	"math/rand/v2"
	"slices"

	"github.com/statekit/statekit/model"
)

// The key-group workload: beside the verbs, clients write three keys that
// share a hash tag ("{g}a", "{g}b", "{g}c") with short deadlines, and
// delete two or three of them at once, alone or inside an Update, now and
// then beside one of the shared keys. The linearizability check takes keys
// with one hash tag as one partition (package linearizability), so there
// a Del's count is checked whatever it is, where on keys checked one by
// one only a count of none or all is; and with deadlines a few
// milliseconds long, many counts hinge on whether a key had expired (an
// expired row no sweep has deleted yet is not counted). An Update over the
// group is checked whole there too.
//
// Every draw comes from a stream of its own (streamGroup), so the verbs'
// stream draws what it drew before.

// streamGroup is the key-group workload's stream.
const streamGroup uint64 = 0x51a3003

// groupOneIn: one client operation in groupOneIn, of those the recipes and
// transfers leave, is the key group's.
const groupOneIn = 8

// groupKeys are the group: only this workload, sweeps, deadline probes
// and the calls that the probes' focus turns to them write them.
var groupKeys = []string{"{g}a", "{g}b", "{g}c"}

// groupTurn draws whether the next client operation is the key group's.
func (w *world) groupTurn() bool { return w.rngGroup.IntN(groupOneIn) == 0 }

// groupOp has client c of p make one call of the key-group workload.
func (w *world) groupOp(t *thread, p *process, c *client) {
	r := w.rngGroup
	var in model.Input
	switch x := r.IntN(20); {
	case x < 10:
		in = model.Input{Kind: model.Set, Key: groupKey(r), Value: model.Int(int64(r.IntN(3))), TTLMillis: groupTTL(r)}
	case x < 13:
		in = model.Input{Kind: model.IncrBy, Key: groupKey(r), Delta: 1, TTLMillis: groupTTL(r)}
	case x < 14:
		in = model.Input{Kind: model.Expire, Key: groupKey(r), TTLMillis: groupTTL(r)}
	case x < 15:
		in = model.Input{Kind: model.Get, Key: groupKey(r)}
	case x < 18:
		in = groupDel(r)
	case x < 19:
		in = groupDel(r)
		in.Keys = append(in.Keys, w.keys[r.IntN(len(w.keys))])
	default:
		in = model.Input{Kind: model.Update, Ops: []model.Input{groupDel(r),
			{Kind: model.Set, Key: groupKey(r), Value: model.Int(int64(r.IntN(3))), TTLMillis: groupTTL(r)}}}
		if r.IntN(2) == 0 {
			in.Ops[0], in.Ops[1] = in.Ops[1], in.Ops[0]
		}
	}
	out, known := w.verb(t, p, c.id, &in)
	if !known || out.Err != model.ErrNone {
		return
	}
	if in.Kind != model.Update {
		w.countPartialDel(in, out)
		w.noteKVDeadline(in, out)
		return
	}
	for i, sub := range in.Ops {
		sub.NowMillis = in.NowMillis
		w.countPartialDel(sub, out.Sub[i])
		w.noteKVDeadline(sub, out.Sub[i])
	}
}

// countPartialDel counts a Del of the group's keys alone that answered a
// count of some of them (Stats.PartialDels).
func (w *world) countPartialDel(in model.Input, out model.Output) {
	if in.Kind != model.Del || out.Err != model.ErrNone {
		return
	}
	keys := map[string]bool{}
	for _, k := range in.Keys {
		if !slices.Contains(groupKeys, k) {
			return
		}
		keys[k] = true
	}
	if out.N > 0 && out.N < len(keys) {
		w.stats.PartialDels++
	}
}

// groupKey draws a key of the group.
func groupKey(r *rand.Rand) string { return groupKeys[r.IntN(len(groupKeys))] }

// groupTTL draws a deadline: none one time in three, else from 1 ms to 5
// s, so that Dels meet keys live, expired long ago and just expired (a
// client's calls are some tens of milliseconds apart).
func groupTTL(r *rand.Rand) int64 {
	switch r.IntN(12) {
	case 0, 1, 2, 3:
		return 0
	case 4, 5:
		return 1 + r.Int64N(30)
	case 6, 7, 8:
		return 30 + r.Int64N(970)
	}
	return 1000 + r.Int64N(4000)
}

// groupDel draws a Del of two or three keys of the group, now and then one
// of them twice.
func groupDel(r *rand.Rand) model.Input {
	in := model.Input{Kind: model.Del}
	for range 2 + r.IntN(2) {
		in.Keys = append(in.Keys, groupKey(r))
	}
	return in
}
