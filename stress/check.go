package stress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// check reads back every journal, the resource and the file, and records
// each violation in the report.
func (d *driver) check(ctx context.Context) error {
	r := d.report
	r.Started = len(d.procs)
	history, err := d.history()
	if err != nil {
		return err
	}
	d.count(history)

	started := time.Now()
	d.checkLinearizable(history)
	r.CheckTime = time.Since(started)
	grants := checkTokens(r, history)

	res2, err := openResource(d.resource)
	if err != nil {
		return err
	}
	writes, integrity, err := res2.writes(ctx)
	res2.close()
	if err != nil {
		return err
	}
	if integrity != "ok" {
		r.violate(KindIntegrity, "fenced resource: integrity_check: %s", integrity)
	}
	checkFence(r, writes, grants)

	finals, err := checkFile(ctx, r, d.path, counterKeysIn(history))
	if err != nil {
		return err
	}
	checkCounters(r, history, finals)
	return nil
}

// history reads every worker's journal. An op a kill left unknown gets
// the time its process was seen dead as the bound of its outcome.
func (d *driver) history() ([]linearizability.Op, error) {
	journals := make([][]linearizability.Op, 0, len(d.procs))
	for _, p := range d.procs {
		f, err := os.Open(p.journal)
		if errors.Is(err, os.ErrNotExist) {
			continue // killed before it opened its journal
		}
		if err != nil {
			return nil, fmt.Errorf("stress: %w", err)
		}
		ops, err := linearizability.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("stress: %s: %w", p.journal, err)
		}
		for i := range ops {
			if ops[i].Client != p.client {
				return nil, fmt.Errorf("stress: %s: op of client %d", p.journal, ops[i].Client)
			}
			if ops[i].Unknown && ops[i].Return <= ops[i].Call {
				ops[i].Return = p.endNanos
				if p.killed {
					d.report.Cut++
				}
			}
		}
		journals = append(journals, ops)
	}
	return linearizability.Merge(journals...), nil
}

// count fills the report's call figures and the clock spread.
func (d *driver) count(history []linearizability.Op) {
	r := d.report
	r.Operations = len(history)
	var lo, hi int64
	first := true
	for _, op := range history {
		if op.Unknown {
			continue
		}
		off := op.Input.NowMillis - op.Call/int64(time.Millisecond)
		if first || off < lo {
			lo = off
		}
		if first || off > hi {
			hi = off
		}
		first = false
	}
	r.Failed = countUnknown(history) - r.Cut
	r.ClockSpread = time.Duration(hi-lo) * time.Millisecond
}

func countUnknown(history []linearizability.Op) int {
	n := 0
	for _, op := range history {
		if op.Unknown {
			n++
		}
	}
	return n
}

// grant is a lease grant whose answer a worker saw.
type grant struct {
	name, owner string
	client      int
	token       int64
	call, ret   int64
}

// checkTokens checks the fencing tokens the workers were granted: one
// owner per token, and a grant that began after another returned gets a
// higher token (or the same one, extended, for the same owner). It returns
// the grants.
func checkTokens(r *Report, history []linearizability.Op) []grant {
	var grants []grant
	for _, op := range history {
		if op.Event != linearizability.Verb || op.Unknown || op.Input.Kind != model.Lease || op.Output.Err != model.ErrNone {
			continue
		}
		grants = append(grants, grant{name: op.Input.Key, owner: op.Input.Owner, client: op.Client,
			token: op.Output.Token, call: op.Call, ret: op.Return})
	}
	r.Grants = len(grants)

	owners := map[string]map[int64][]string{}
	for _, g := range grants {
		if owners[g.name] == nil {
			owners[g.name] = map[int64][]string{}
		}
		if !slices.Contains(owners[g.name][g.token], g.owner) {
			owners[g.name][g.token] = append(owners[g.name][g.token], g.owner)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(owners)) {
		for _, token := range slices.Sorted(maps.Keys(owners[name])) {
			if o := owners[name][token]; len(o) > 1 {
				r.violate(KindDuplicateToken, "lease %q: token %d granted to %s", name, token, strings.Join(o, " and "))
			}
		}
	}

	// Sweep the grants in call order, keeping the highest token among
	// those that returned before the current call.
	byCall := slices.Clone(grants)
	slices.SortStableFunc(byCall, func(a, b grant) int { return cmp.Compare(a.call, b.call) })
	byRet := slices.Clone(grants)
	slices.SortStableFunc(byRet, func(a, b grant) int { return cmp.Compare(a.ret, b.ret) })
	type top struct {
		token int64
		g     grant
	}
	highest := map[string]top{}
	j := 0
	for _, g := range byCall {
		for ; j < len(byRet) && byRet[j].ret < g.call; j++ {
			if h := byRet[j]; h.token > highest[h.name].token {
				highest[h.name] = top{h.token, h}
			}
		}
		h, ok := highest[g.name]
		if ok && (g.token < h.token || (g.token == h.token && g.owner != h.g.owner)) {
			r.violate(KindTokenOrder, "lease %q: %s got token %d after %s got token %d", g.name, g.owner, g.token, h.g.owner, h.token)
		}
	}
	return grants
}

// checkFence checks the fenced resource's log: per name, the accepted
// tokens never go down, each came from one holder only, and each was
// granted to its writer.
func checkFence(r *Report, writes []fencedWrite, grants []grant) {
	granted := map[string]bool{}
	for _, g := range grants {
		granted[fmt.Sprintf("%s/%d/%d", g.name, g.token, g.client)] = true
	}
	highest := map[string]int64{}
	writers := map[string]map[int64]int{}
	for _, w := range writes {
		if !w.accepted {
			r.Refused++
			continue
		}
		r.Fenced++
		if w.token < highest[w.name] {
			r.violate(KindTokenOrder, "fenced resource %q accepted token %d after %d", w.name, w.token, highest[w.name])
		}
		highest[w.name] = max(highest[w.name], w.token)
		if writers[w.name] == nil {
			writers[w.name] = map[int64]int{}
		}
		if c, ok := writers[w.name][w.token]; ok && c != w.client {
			r.violate(KindDuplicateToken, "fenced resource %q accepted token %d from two holders, w%d and w%d", w.name, w.token, c, w.client)
		}
		writers[w.name][w.token] = w.client
		if !granted[fmt.Sprintf("%s/%d/%d", w.name, w.token, w.client)] {
			r.violate(KindFence, "fenced resource %q accepted token %d from w%d, which was never seen granted it", w.name, w.token, w.client)
		}
	}
}

// checkFile opens the file as a new process would, runs DB.Check on it and
// reads the counters.
func checkFile(ctx context.Context, r *Report, path string, counters []string) (map[string]int64, error) {
	db, err := state.Open(path, state.WithoutBackground())
	if err != nil {
		r.violate(KindIntegrity, "reopen after the run: %v", err)
		return nil, nil
	}
	defer db.Close()
	findings, err := db.Check(ctx)
	if err != nil {
		r.violate(KindIntegrity, "%v", err)
	}
	for _, f := range findings {
		r.violate(KindIntegrity, "%s", f)
	}
	finals := map[string]int64{}
	for _, k := range counters {
		v, err := db.Get(ctx, k)
		switch {
		case errors.Is(err, state.ErrNotFound):
			finals[k] = 0
		case err != nil:
			r.violate(KindIntegrity, "read counter %q: %v", k, err)
		default:
			n, ok := v.Int()
			if !ok {
				r.violate(KindCounter, "counter %q holds bytes %q", k, v.Bytes())
			}
			finals[k] = n
		}
	}
	return finals, nil
}

// checkCounters checks each counter against its increments: the final
// value counts every +1 that returned and at most the unknown ones, and no
// two returned the same value.
func checkCounters(r *Report, history []linearizability.Op, finals map[string]int64) {
	for _, k := range slices.Sorted(maps.Keys(finals)) {
		final, ok := finals[k]
		if !ok {
			continue
		}
		var known, unknown int64
		seen := map[int64]int{}
		for _, op := range history {
			if op.Event != linearizability.Verb || op.Input.Kind != model.IncrBy || op.Input.Key != k {
				continue
			}
			if op.Unknown {
				unknown++
				continue
			}
			known++
			if c, dup := seen[op.Output.Int]; dup {
				r.violate(KindCounter, "counter %q: c%d and c%d both answered %d", k, c, op.Client, op.Output.Int)
			}
			seen[op.Output.Int] = op.Client
			if op.Output.Int > final {
				r.violate(KindCounter, "counter %q: c%d answered %d, above the final value %d", k, op.Client, op.Output.Int, final)
			}
		}
		if final < known || final > known+unknown {
			r.violate(KindCounter, "counter %q is %d after %d increments that returned and %d unknown", k, final, known, unknown)
		}
	}
}

// counterKeysIn returns the counter keys the history touches, sorted.
func counterKeysIn(history []linearizability.Op) []string {
	seen := map[string]bool{}
	for _, op := range history {
		if op.Event == linearizability.Verb && op.Input.Kind == model.IncrBy && isCounter(op.Input.Key) {
			seen[op.Input.Key] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// checkLinearizable checks the history one epoch at a time: an epoch's keys
// are its own, so its ops form a history of their own (with every Sweep,
// which reaches every key), and the check holds one epoch in memory at a
// time besides the history.
func (d *driver) checkLinearizable(history []linearizability.Op) {
	r := d.report
	epochs := map[int64]bool{}
	for _, op := range history {
		if e, ok := epochOf(op.Input); ok {
			epochs[e] = true
		}
	}
	partitions := 0
	for _, e := range slices.Sorted(maps.Keys(epochs)) {
		var ops []linearizability.Op // in call order, as history is
		for _, op := range history {
			if oe, ok := epochOf(op.Input); !ok || oe == e {
				ops = append(ops, op)
			}
		}
		res := linearizability.Check(ops, d.cfg.CheckTimeout)
		partitions += res.Partitions
		if res.Ok() {
			continue
		}
		r.Linearizability = fmt.Sprintf("%s in epoch %d", res, e)
		r.violate(KindLinearizability, "epoch %d: %s\n%s", e, res, res.Description)
		html := filepath.Join(d.cfg.Dir, "linearizability.html")
		if err := res.WriteHTML(html); err == nil {
			r.HTML = html
		}
		return
	}
	r.Linearizability = fmt.Sprintf("%s (%d partitions, %d operations, %d epochs)",
		linearizability.Ok, partitions, len(history), len(epochs))
}

// epochOf returns the epoch of the keys in (all of one epoch), or false for
// a call without a key (Sweep).
func epochOf(in model.Input) (int64, bool) {
	key := in.Key
	switch {
	case len(in.Keys) > 0:
		key = in.Keys[0]
	case len(in.Ops) > 0:
		return epochOf(in.Ops[0])
	}
	e, _, ok := strings.Cut(key, "/")
	if !ok || !strings.HasPrefix(e, "e") {
		return 0, false
	}
	n, err := strconv.ParseInt(e[1:], 10, 64)
	return n, err == nil
}
