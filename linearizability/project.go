package linearizability

import (
	"cmp"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/statekit/statekit/model"
)

// projection is a history split into partitions, sorted by name.
type projection struct {
	names []string
	parts map[string]partition
	ops   map[string][]porcupine.Operation
}

// piece is one Op's part in one partition.
type piece struct {
	p  partition
	st step
}

// project splits history (already validated) into partitions (per key,
// per lease, per hash tag), leaving out the ops whose indexes skip holds.
// A call with a claim takes effect no earlier than it, and no later than
// ends holds for it (claimBounds).
func project(history []Op, skip map[int]bool, ends map[int]int64) projection {
	pr := projection{parts: map[string]partition{}, ops: map[string][]porcupine.Operation{}}

	// Every partition any op touches, and the time bounds.
	var maxTime int64
	var powerLosses []int64
	var hardLosses []int64             // the power losses no process survived
	recovered := map[int64]*Recovery{} // by the power loss's time
	clients := map[int]bool{}
	groupKeys := map[string][]string{} // a group partition's name -> its keys, sorted
	addKey := func(k string) {
		p := keyPartition(k)
		pr.parts[p.String()] = p
		if p.group && !slices.Contains(groupKeys[p.String()], k) {
			keys := append(groupKeys[p.String()], k)
			slices.Sort(keys)
			groupKeys[p.String()] = keys
		}
	}
	for i, op := range history {
		if skip[i] {
			continue
		}
		maxTime = max(maxTime, op.Call, op.Return)
		switch op.Event {
		case PowerLoss:
			powerLosses = append(powerLosses, op.Call)
			if !op.Survived {
				hardLosses = append(hardLosses, op.Call)
			}
			if rec := op.Recovered; rec != nil {
				recovered[op.Call] = rec
				// A name no call touched is a partition too: its
				// only row before the loss is absent, and the check
				// holds the recovered row to that.
				for _, k := range rec.Keys {
					addKey(k)
				}
				for _, l := range rec.Leases {
					p := partition{lease: true, key: l}
					pr.parts[p.String()] = p
				}
			}
		case Verb:
			clients[op.Client] = true
			for _, p := range touched(op.Input) {
				pr.parts[p.String()] = p
			}
			for _, k := range touchedKeys(op.Input) {
				addKey(k)
			}
			for _, p := range listed(op) {
				if p.lease {
					pr.parts[p.String()] = p
				} else {
					addKey(p.key)
				}
			}
		}
	}
	for name := range pr.parts {
		pr.names = append(pr.names, name)
	}
	slices.Sort(pr.names)
	slices.Sort(powerLosses)
	slices.Sort(hardLosses)

	// Porcupine's visualisation wants client ids 0..n-1; events get n.
	ids := make([]int, 0, len(clients))
	for c := range clients {
		ids = append(ids, c)
	}
	slices.Sort(ids)
	clientIndex := make(map[int]int, len(ids))
	for i, c := range ids {
		clientIndex[c] = i
	}
	eventClient := len(ids)

	kvNames, allNames := []string{}, pr.names
	for _, name := range pr.names {
		if !pr.parts[name].lease {
			kvNames = append(kvNames, name)
		}
	}

	add := func(name string, st step) {
		cl := eventClient
		if st.event == Verb {
			cl = clientIndex[st.client]
		}
		s := st
		if st.era >= 0 {
			if rec, p := recovered[powerLosses[st.era]], pr.parts[name]; rec != nil && rec.names(p, groupKeys[name]) {
				c := p.fromState(rec.State)
				s.target = &c
			}
		}
		pr.ops[name] = append(pr.ops[name], porcupine.Operation{
			ClientId: cl, Input: &s, Call: st.call, Return: st.ret,
		})
	}

	for i, op := range history {
		if skip[i] {
			continue
		}
		base := step{index: i, event: op.Event, client: op.Client, call: op.Call, ret: op.Return, fullOf: -1, survived: op.Survived}
		base.era = eraOf(powerLosses, op)
		if op.Event != Verb {
			for _, name := range allNames {
				add(name, base)
			}
			continue
		}
		if op.Unknown {
			base.ret = maxTime + 1
			if op.Return > op.Call { // the process was seen dead by then
				base.ret = op.Return
			}
			// Open until the first power loss after the call that no
			// process survived: a call in flight at a survived one may
			// take effect after it.
			if j, _ := slices.BinarySearchFunc(hardLosses, op.Call, func(t, call int64) int {
				return cmp.Compare(t, call+1) // first power loss strictly after the call
			}); j < len(hardLosses) {
				base.ret = min(base.ret, hardLosses[j]-1)
			}
			base.unknown = true
			base.nowLatest = op.NowLatest
		}
		base.call = max(base.call, op.Claimed)
		if end, ok := ends[i]; ok {
			base.ret = min(base.ret, end)
		}
		base.full = op.Durability == Full
		base.durable = base.full && !op.Unknown && CertainWrite(op.Input, op.Output)
		base.final = len(powerLosses) == 0 || op.Call > powerLosses[len(powerLosses)-1]

		pieces := split(op, base)
		switch op.Input.Kind {
		case model.Sweep:
			pieces = splitSweep(op, base, kvNames, pr.parts)
		case model.Scan, model.Leases:
			pieces = splitList(op, base, allNames, pr.parts, groupKeys)
		}
		own := map[string]bool{}
		for _, pc := range pieces {
			name := pc.p.String()
			own[name] = true
			add(name, pc.st)
		}
		if base.durable {
			ev := step{index: i, event: Durable, call: op.Call, ret: op.Return, fullOf: i, era: base.era}
			for _, name := range allNames {
				if !own[name] {
					add(name, ev)
				}
			}
		}
	}
	return pr
}

// eraOf returns the index in powerLosses (sorted times) of the power loss
// that ends op's era: op itself for a PowerLoss, else the first after its
// call; -1 when none comes after.
func eraOf(powerLosses []int64, op Op) int {
	at := op.Call + 1 // the first strictly after the call
	if op.Event == PowerLoss {
		at = op.Call
	}
	j, _ := slices.BinarySearch(powerLosses, at)
	if j == len(powerLosses) {
		return -1
	}
	return j
}

// touched returns the partitions in touches, with repeats.
func touched(in model.Input) []partition {
	switch {
	case in.Kind.IsLease():
		return []partition{{lease: true, key: in.Key}}
	}
	switch in.Kind {
	case model.Get, model.Set, model.IncrBy, model.CAS, model.Expire, model.TTL:
		return []partition{keyPartition(in.Key)}
	case model.Del:
		ps := make([]partition, len(in.Keys))
		for i, k := range in.Keys {
			ps[i] = keyPartition(k)
		}
		return ps
	case model.Update, model.Flush:
		var ps []partition
		for _, sub := range in.Ops {
			ps = append(ps, touched(sub)...)
		}
		return ps
	}
	return nil
}

// touchedKeys returns the key rows in touches (not leases), with repeats.
func touchedKeys(in model.Input) []string {
	switch in.Kind {
	case model.Get, model.Set, model.IncrBy, model.CAS, model.Expire, model.TTL:
		return []string{in.Key}
	case model.Del:
		return in.Keys
	case model.Update, model.Flush:
		var keys []string
		for _, sub := range in.Ops {
			keys = append(keys, touchedKeys(sub)...)
		}
		return keys
	}
	return nil
}

// listed returns the partitions of the rows a Scan or Leases answered: a
// name no other call touched is a partition too, and the check holds the
// listing to the row that partition must hold.
func listed(op Op) []partition {
	if op.Unknown {
		return nil
	}
	var ps []partition
	for _, r := range op.Output.Rows {
		ps = append(ps, partition{key: r.Key})
	}
	for _, l := range op.Output.Leases {
		ps = append(ps, partition{lease: true, key: l.Name})
	}
	return ps
}

// splitList projects a Scan or Leases into each partition of its namespace
// it covers: every key or lease with its prefix, and every one it listed
// (one without the prefix is listed wrongly, and the spec, listing nothing
// there, says so). Each part is checked against
// the rows listed for its own name, none if it was left out, so a listing
// is checked key by key: each key's row as some moment of the call shows
// it, not every key at one moment. A group gets a part for each of its
// keys (groupKeys), each checked against that key's rows alone.
func splitList(op Op, base step, names []string, parts map[string]partition, groupKeys map[string][]string) []piece {
	in, out := op.Input, op.Output
	lease := in.Kind == model.Leases
	mine := map[string]model.Output{}
	for _, r := range out.Rows {
		name := partition{key: r.Key}.String()
		mine[name] = model.Output{Err: out.Err, Rows: append(mine[name].Rows, r)}
	}
	for _, l := range out.Leases {
		name := partition{lease: true, key: l.Name}.String()
		mine[name] = model.Output{Err: out.Err, Leases: append(mine[name].Leases, l)}
	}
	var pieces []piece
	// part adds p's part for key (or lease) k, checked against k's rows
	// alone when only is set.
	part := func(p partition, k, only string) {
		name := partition{lease: lease, key: k}.String()
		want, has := mine[name]
		if !has && !strings.HasPrefix(k, in.Key) {
			return
		}
		if !has {
			want = model.Output{Err: out.Err}
		}
		st := base
		st.in = model.Input{Kind: in.Kind, Key: in.Key, All: in.All, NowMillis: in.NowMillis}
		st.want, st.check, st.only = want, !op.Unknown, only
		pieces = append(pieces, piece{p: p, st: st})
	}
	for _, name := range names {
		p := parts[name]
		switch {
		case p.lease != lease:
		case p.group:
			for _, k := range groupKeys[name] {
				part(p, k, k)
			}
		default:
			part(p, p.key, "")
		}
	}
	return pieces
}

// split projects a verb call into each partition it touches (Sweep, Scan
// and Leases are handled by the caller: they reach every partition of
// their namespace).
func split(op Op, base step) []piece {
	in, out := op.Input, op.Output
	switch in.Kind {
	case model.Get, model.Set, model.IncrBy, model.CAS, model.Expire, model.TTL,
		model.Lease, model.Renew, model.Release:
		st := base
		st.in, st.want, st.check = in, out, !op.Unknown
		return []piece{{p: touched(in)[0], st: st}}
	case model.Del:
		return splitDel(op, base)
	case model.Update:
		return splitUpdate(op, base)
	case model.Flush:
		var pieces []piece
		for _, g := range groupSubs(in.Ops, len(in.Ops)) {
			st := base
			st.in = model.Input{Kind: model.Flush, NowMillis: in.NowMillis, Ops: g.ops}
			st.want, st.check = model.Output{}, false
			pieces = append(pieces, piece{p: g.p, st: st})
		}
		return pieces
	}
	return nil
}

// distinct returns keys without repeats, in first-seen order.
func distinct(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// delCount returns the count the part of a Del of n distinct keys that
// holds m of them (those of one partition) answered, when the whole
// answer total tells it: 0 (nothing was live), m (everything was), or total
// when the part is the whole Del.
func delCount(total, n, m int) (int, bool) {
	switch total {
	case 0:
		return 0, true
	case n:
		return m, true
	}
	if m == n {
		return total, true
	}
	return 0, false
}

// byPartition splits keys (distinct) by partition, in first-seen order.
func byPartition(keys []string) ([]partition, [][]string) {
	var ps []partition
	var parts [][]string
	for _, k := range keys {
		p := keyPartition(k)
		i := slices.Index(ps, p)
		if i < 0 {
			ps, parts = append(ps, p), append(parts, nil)
			i = len(ps) - 1
		}
		parts[i] = append(parts[i], k)
	}
	return ps, parts
}

// splitSweep projects a Sweep into every key partition. Its count is
// checked per key only when it is 0: then no key may have been expired.
func splitSweep(op Op, base step, kvNames []string, parts map[string]partition) []piece {
	st := base
	st.in = model.Input{Kind: model.Sweep, NowMillis: op.Input.NowMillis}
	st.want = model.Output{Err: op.Output.Err}
	st.check = !op.Unknown && op.Output.Err == model.ErrNone && op.Output.N == 0
	pieces := make([]piece, len(kvNames))
	for i, name := range kvNames {
		pieces[i] = piece{p: parts[name], st: st}
	}
	return pieces
}

// splitDel projects a Del into each partition of its keys, as a Del of
// the keys it holds, its count checked where the whole count tells it.
func splitDel(op Op, base step) []piece {
	keys := distinct(op.Input.Keys)
	ps, parts := byPartition(keys)
	pieces := make([]piece, len(ps))
	for i, p := range ps {
		count, known := delCount(op.Output.N, len(keys), len(parts[i]))
		st := base
		st.in = model.Input{Kind: model.Del, Keys: parts[i], NowMillis: op.Input.NowMillis}
		st.want = model.Output{Err: op.Output.Err, N: count}
		st.check = !op.Unknown && known
		pieces[i] = piece{p: p, st: st}
	}
	return pieces
}

// subGroup is the sub-inputs of an Update or Flush that touch one partition,
// with the indexes they had.
type subGroup struct {
	p     partition
	ops   []model.Input
	index []int
	// parts of a Del over several partitions, by position in ops
	delPart map[int]int // position -> distinct key count of the original Del
}

// groupSubs groups the first n sub-inputs by partition, in partition-name
// order, splitting a Del over several partitions into Dels of each one's
// keys (a Del the spec refuses into those of the keys it refuses for: it
// deletes nothing).
func groupSubs(ops []model.Input, n int) []subGroup {
	byName := map[string]*subGroup{}
	var names []string
	addSub := func(p partition, in model.Input, idx, delKeys int) {
		name := p.String()
		g, ok := byName[name]
		if !ok {
			g = &subGroup{p: p, delPart: map[int]int{}}
			byName[name] = g
			names = append(names, name)
		}
		if delKeys > 0 {
			g.delPart[len(g.ops)] = delKeys
		}
		g.ops = append(g.ops, in)
		g.index = append(g.index, idx)
	}
	for idx, sub := range ops[:n] {
		if sub.Kind == model.Del {
			keys := distinct(sub.Keys)
			refused := model.Refuses(sub)
			ps, parts := byPartition(keys)
			for i, p := range ps {
				part := model.Input{Kind: model.Del, Keys: parts[i]}
				if refused && !model.Refuses(part) {
					// Refused for another of its keys, the Del
					// deletes nothing here: this part of the
					// Update is rolled back by another partition's.
					continue
				}
				addSub(p, part, idx, len(keys))
			}
			continue
		}
		for _, p := range touched(sub) {
			addSub(p, sub, idx, 0)
		}
	}
	slices.Sort(names)
	groups := make([]subGroup, len(names))
	for i, name := range names {
		groups[i] = *byName[name]
	}
	return groups
}

func splitUpdate(op Op, base step) []piece {
	in, out := op.Input, op.Output
	n := len(in.Ops)
	failed := -1 // index of the sub-input that aborted the update
	if !op.Unknown {
		n = min(n, len(out.Sub))
		if out.Err != model.ErrNone && out.Err != model.ErrAborted && n > 0 {
			failed = n - 1
		}
	}
	var pieces []piece
	for _, g := range groupSubs(in.Ops, n) {
		st := base
		st.in = model.Input{Kind: model.Update, NowMillis: in.NowMillis, Ops: g.ops, Abort: in.Abort}
		if op.Unknown {
			pieces = append(pieces, piece{p: g.p, st: st})
			continue
		}
		st.check = true
		st.want = model.Output{Err: out.Err, Sub: make([]model.Output, len(g.ops))}
		st.subCheck = make([]bool, len(g.ops))
		hasFailed := false
		for pos, idx := range g.index {
			sub := out.Sub[idx]
			st.subCheck[pos] = true
			if keys, ok := g.delPart[pos]; ok {
				count, known := delCount(sub.N, keys, len(g.ops[pos].Keys))
				sub = model.Output{Err: sub.Err, N: count}
				st.subCheck[pos] = known
			}
			st.want.Sub[pos] = sub
			hasFailed = hasFailed || idx == failed
		}
		if out.Err != model.ErrNone && !hasFailed && (failed >= 0 || in.Abort) {
			// Rolled back by a sub-input of another partition, or by the
			// callback: here it looks like the callback's own abort. An
			// ErrAborted without the callback's abort is left as it is,
			// for the spec to refuse.
			st.in.Abort = true
			st.want.Err = model.ErrAborted
		}
		pieces = append(pieces, piece{p: g.p, st: st})
	}
	return pieces
}
