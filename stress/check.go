package stress

import (
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

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// check reads back every journal, the notes, the resource and the file,
// and records each violation in the report.
func (d *driver) check(ctx context.Context) error {
	r := d.report
	r.Started = len(d.procs)
	for _, p := range d.procs {
		p.tail.close()
	}
	began := time.Now()
	phase := func(what string) {
		fmt.Fprintf(d.cfg.Log, "stress: %s (%v)\n", what, time.Since(began).Round(time.Millisecond))
	}
	if err := d.readNotes(); err != nil {
		return err
	}
	history, err := d.history()
	if err != nil {
		return err
	}
	phase(fmt.Sprintf("read %d operations", len(history)))
	d.count(history)
	if err := d.checkNotes(history); err != nil {
		return err
	}
	phase("checked notes and buffered increments")

	started := time.Now()
	d.checkLinearizable(history)
	r.CheckTime = time.Since(started)
	phase("checked linearizability")

	r.violations(checks.Audits(history, isTransferPair))
	grants := checks.Grants(history)
	r.violations(checks.Tokens(grants))
	if d.redis != nil {
		d.checkRedisClocks(history)
	} else {
		d.checkClocks(history)
	}
	phase("checked tokens and clocks")

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
	var vs []checks.Violation
	r.Fenced, r.Refused, vs = checks.Fence(writes, grants)
	r.violations(vs)

	counters := counterKeysIn(history)
	var finals map[string]int64
	if d.redis != nil {
		finals = d.checkStore(ctx, counters)
		phase("checked the store")
	} else {
		if finals, err = checkFile(ctx, r, d.path, counters); err != nil {
			return err
		}
		phase("checked the file")
	}
	for _, k := range counters {
		if final, ok := finals[k]; ok {
			r.violations(checks.Counter(history, k, final))
		}
	}

	phase("checked counters")
	work := newWorkCount(d.procOf, d.isSweeper)
	for _, op := range history {
		work.add(op)
	}
	r.Done = Work{Calls: r.Operations, Kills: r.Kills, Grants: len(grants), Contended: work.contended, Swept: work.swept,
		ServerKills: r.ServerKills}
	r.Sweeps = work.sweeps
	if !d.cfg.Until.IsZero() && !r.Done.covers(d.cfg.Until) {
		r.violate(KindShortRun, "the run stopped because %s after %v, having done %s; it was to do %s",
			r.Stopped, r.Elapsed.Round(time.Millisecond), r.Done, d.cfg.Until)
	}
	return nil
}

// readNotes reads every worker's notes into d.notes.
func (d *driver) readNotes() error {
	d.notes = make([][]note, len(d.procs))
	for i, p := range d.procs {
		notes, err := readNotes(p.cfg.Notes)
		if err != nil {
			return fmt.Errorf("stress: %w", err)
		}
		d.notes[i] = notes
	}
	return nil
}

// history reads every worker's journal. An op a kill left unknown gets
// the time its process was seen dead as the bound of its outcome; on
// Redis, the death of the last server its command could have reached,
// when earlier (boundByOutage). A flush that wrote nothing and put its deltas back (recorded
// with no increments), a sweep that deleted nothing (a Del of no keys),
// and a call the server refused (a refused note) are left out. An op
// without its answer in a worker that exited cleanly is reported
// (unanswered).
func (d *driver) history() ([]linearizability.Op, error) {
	journals := make([][]linearizability.Op, 0, len(d.procs))
	for i, p := range d.procs {
		refused := map[opID]bool{}
		heard := map[opID]int64{} // when an uncertain call's error returned
		noted := map[opID]bool{}  // an op whose error a note tells
		for _, n := range d.notes[i] {
			switch n.Kind {
			case noteRefused:
				refused[opID{n.Client, n.Seq}] = true
			case noteUncertain:
				heard[opID{n.Client, n.Seq}] = n.Return
			}
			if n.Kind != noteBuffered {
				noted[opID{n.Client, n.Seq}] = true
			}
		}
		cleanly := !p.killed && p.exitErr == nil
		f, err := os.Open(p.cfg.Journal)
		if errors.Is(err, os.ErrNotExist) {
			continue // killed before it opened its journal
		}
		if err != nil {
			return nil, fmt.Errorf("stress: %w", err)
		}
		ops, err := linearizability.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("stress: %s: %w", p.cfg.Journal, err)
		}
		kept := ops[:0]
		for _, op := range ops {
			if !p.owns(op.Client) {
				return nil, fmt.Errorf("stress: %s: op of client %d", p.cfg.Journal, op.Client)
			}
			if cleanly && op.Unknown && op.Return <= op.Call && !noted[opID{op.Client, op.Seq}] {
				d.unanswered(p, op)
			}
			switch {
			case op.Input.Kind == model.Flush && len(op.Input.Ops) == 0, op.Input.Kind == model.Del && len(op.Input.Keys) == 0:
				continue // a flush that wrote nothing, a sweep that deleted nothing
			case op.Unknown && refused[opID{op.Client, op.Seq}]:
				continue // never applied
			case op.Unknown && d.redis != nil:
				// A reply lost to an outage or a timeout, or a call cut by
				// a kill: on a live server the command may still run after
				// the error, until its process is gone.
				if op.Return <= op.Call && p.killed {
					d.report.Cut++
				}
				last, ok := heard[opID{op.Client, op.Seq}]
				if !ok {
					last = p.endNanos // cut by a kill: heard of until its process died
				}
				op.Return = d.redis.boundByOutage(last, p.endNanos)
				if d.redis.relaunchedWithin(op.Call, last) {
					d.report.LooseBound++
				}
			case op.Unknown && op.Return <= op.Call:
				op.Return = p.endNanos
				if p.killed {
					d.report.Cut++
				}
			case op.Unknown:
				d.report.Failed++
			}
			kept = append(kept, op)
		}
		journals = append(journals, kept)
	}
	return linearizability.Merge(journals...), nil
}

// unanswered reports op, which its worker journalled as begun and never
// answered, nor noted an error for, though the worker exited cleanly:
// nothing cut it, so the engine left it unfinished. Taken as unknown, it
// would hide what it lost: a flush that Close began and never ended lost
// its increments, and the checks would count them as taken, and as
// increments that may not have applied.
func (d *driver) unanswered(p *proc, op linearizability.Op) {
	if op.Input.Kind == model.Flush {
		d.report.violate(KindBuffered, "worker %s closed cleanly, but its flush #%d (%s) never ended: the increments it took may never have been written",
			p.name(), op.Seq, op.Input)
		return
	}
	d.report.violate(KindWorker, "worker %s exited cleanly, but c%d #%d %s never answered", p.name(), op.Client, op.Seq, op.Input)
}

// count fills the report's call figures and the clock spread.
func (d *driver) count(history []linearizability.Op) {
	r := d.report
	r.Operations = len(history)
	var lo, hi int64
	first := true
	for _, op := range history {
		if op.Input.Kind == model.Flush {
			r.Flushes++
		}
		if checks.IsAudit(op, isTransferPair) {
			r.Audits++
		}
		if i := d.procOf(op.Client); i >= 0 && d.procs[i].cfg.ReadOnly {
			r.ReaderCalls++
			if k := op.Input.Kind; k == model.Scan || k == model.Leases {
				r.ReaderListings++
			}
		}
		if op.Unknown || op.Input.NowMillis == 0 {
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
	r.ClockSpread = time.Duration(hi-lo) * time.Millisecond
}

// checkNotes reports every error a worker noted (the model has no answer
// for it and no fault was injected to explain it) and checks each
// handle's buffered increments against what its flushes took.
func (d *driver) checkNotes(history []linearizability.Op) error {
	r := d.report
	for i, p := range d.procs {
		buffered := map[string]int64{}
		for _, n := range d.notes[i] {
			switch n.Kind {
			case noteBuffered:
				buffered[n.Key] += n.Delta
				r.Buffered++
			case noteError:
				r.violate(KindEngineError, "c%d #%d %s: %s", n.Client, n.Seq, n.Op, n.Err)
			case noteRefused, noteUncertain:
				if n.Kind == noteRefused {
					r.Unavailable++
				} else {
					r.Uncertain++
				}
				if d.redis == nil {
					r.violate(KindEngineError, "c%d #%d %s: %s", n.Client, n.Seq, n.Op, n.Err)
				} else {
					d.checkOutage(n)
				}
			default:
				return fmt.Errorf("stress: %s: a note of unknown kind %q", p.cfg.Notes, n.Kind)
			}
		}
		flusher := p.cfg.flushClient()
		taken := checks.FlushTaken(history, func(c int) bool { return c == flusher })
		cleanly := !p.killed && p.exitErr == nil
		r.violations(checks.Buffered("worker "+p.name(), buffered, taken, cleanly))
	}
	return nil
}

// checkClocks holds every process to the clock rules: no process ran at an
// engine time before one a call of a writable process had used that
// returned before it started (a reader writes no high-water mark, so what
// it used binds no later process); and, on the real clock, each process's
// engine time moved with CLOCK_MONOTONIC while it ran, by its calls and
// flushes.
func (d *driver) checkClocks(history []linearizability.Op) {
	procs := make([]checks.Process, len(d.procs))
	for i, p := range d.procs {
		procs[i] = checks.Process{Name: "worker " + p.name(), Start: p.launched, ReadOnly: p.cfg.ReadOnly}
	}
	for _, op := range history {
		if i := d.procOf(op.Client); i >= 0 {
			procs[i].Ops = append(procs[i].Ops, op)
		}
	}
	d.report.violations(checks.ClockNeverBack(procs))
	if d.cfg.StepClock {
		return // the stepped clock stands still between calls
	}
	for i, p := range procs {
		// A sweep's cutoff is the time its first batch claimed, or the
		// verb's an inline sweep follows: claimed before its call.
		sweeper := d.procs[i].cfg.sweepClient()
		p.Ops = slices.DeleteFunc(slices.Clone(p.Ops), func(op linearizability.Op) bool { return op.Client == sweeper })
		d.report.violations(checks.ClockOffset(p, int64(time.Millisecond)))
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
	checkInfo(ctx, r, db)
	return readCounters(ctx, r, db, counters), nil
}

// checkInfo holds statectl info's counts (Stats) to every row of the file,
// read just before by the checker's handle: alone on the file and without
// background work, so nothing changes between.
func checkInfo(ctx context.Context, r *Report, db *state.DB) {
	var rows []state.KeyInfo
	var leases []state.LeaseInfo
	err := db.Scan(ctx, "", true, func(k state.KeyInfo) error { rows = append(rows, k); return nil })
	if err == nil {
		err = db.Leases(ctx, true, func(l state.LeaseInfo) error { leases = append(leases, l); return nil })
	}
	var s state.Stats
	if err == nil {
		s, err = db.Stats(ctx)
	}
	if err != nil {
		r.violate(KindIntegrity, "read the rows and Stats after the run: %v", err)
		return
	}
	for _, d := range []string{checks.StatsRows(s, rows, leases, nil), checks.WritableMark(s)} {
		if d != "" {
			r.violate(KindInfo, "%s", d)
		}
	}
}

// counterKeysIn returns the counter keys the history touches, sorted.
func counterKeysIn(history []linearizability.Op) []string {
	seen := map[string]bool{}
	var visit func(in model.Input)
	visit = func(in model.Input) {
		if in.Kind == model.IncrBy && isCounter(in.Key) {
			seen[in.Key] = true
		}
		for _, sub := range in.Ops {
			visit(sub)
		}
	}
	for _, op := range history {
		if op.Event == linearizability.Verb {
			visit(op.Input)
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// checkLinearizable checks the history one epoch at a time: an epoch's keys
// are its own, so its ops form a history of their own (with every Sweep
// call, which reaches every key, and the parts on its keys of flushes and
// sweep statements, which take keys of any epoch), and the check holds one
// epoch in memory at a time besides the history.
func (d *driver) checkLinearizable(history []linearizability.Op) {
	r := d.report
	epochs := map[int64]bool{}
	for _, op := range history {
		for _, e := range epochsOf(op.Input) {
			epochs[e] = true
		}
	}
	if d.redis != nil {
		history = widenUnknownTimes(history)
	}
	partitions := 0
	var deadline time.Time // none
	if d.cfg.CheckLimit > 0 {
		deadline = time.Now().Add(d.cfg.CheckLimit)
	}
	sorted := slices.Sorted(maps.Keys(epochs))
	for i, e := range sorted {
		var ops []linearizability.Op // in call order, as history is
		for _, op := range history {
			if op, ok := inEpoch(op, e); ok {
				ops = append(ops, op)
			}
		}
		res := linearizability.CheckBy(ops, d.cfg.CheckTimeout, deadline)
		partitions += res.Partitions
		if res.Ok() {
			continue
		}
		if res.Unchecked > 0 {
			r.Linearizability = fmt.Sprintf("%s: reached the check's limit in epoch %d", res.Verdict, e)
			r.violate(KindCheckLimit, "the linearizability check reached its limit of %v with epoch %d and %d later epochs of %d unchecked (%d of epoch %d's %d partitions): %s",
				d.cfg.CheckLimit, e, len(sorted)-i-1, len(sorted), res.Unchecked, e, res.Partitions, res.Description)
			return
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

// inEpoch returns the part of op on the keys of epoch e, and whether there
// is one. A call without a key (Sweep) is in every epoch. A worker's calls
// stay in one epoch; a flush takes whatever its handle buffered, and a
// sweep statement deletes whatever expired, which may span several: each
// epoch gets the increments, or the deleted keys, of its own keys. (A Del
// whose count says only some of its keys were live cannot be split, and
// goes whole to each of its epochs; no recorded op spanning epochs is one.)
func inEpoch(op linearizability.Op, e int64) (linearizability.Op, bool) {
	es := epochsOf(op.Input)
	if k := op.Input.Kind; (k == model.Scan || k == model.Leases) && len(es) == 0 {
		// A listing whose prefix names no epoch lists the rows of every
		// one: each epoch gets its own.
		other := func(key string) bool { k, ok := epochOfKey(key); return !ok || k != e }
		op.Output.Rows = slices.DeleteFunc(slices.Clone(op.Output.Rows), func(r model.KeyRow) bool { return other(r.Key) })
		op.Output.Leases = slices.DeleteFunc(slices.Clone(op.Output.Leases), func(l model.NamedLease) bool { return other(l.Name) })
		return op, true
	}
	switch {
	case len(es) == 0:
		return op, true
	case !slices.Contains(es, e):
		return op, false
	case len(es) == 1:
		return op, true
	}
	mine := func(key string) bool {
		k, ok := epochOfKey(key)
		return ok && k == e
	}
	switch op.Input.Kind {
	case model.Flush:
		var ops []model.Input
		var subs []model.Output
		for i, sub := range op.Input.Ops {
			if mine(sub.Key) {
				ops = append(ops, sub)
				if i < len(op.Output.Sub) {
					subs = append(subs, op.Output.Sub[i])
				}
			}
		}
		op.Input.Ops, op.Output.Sub = ops, subs
	case model.Del:
		all := len(distinctKeys(op.Input.Keys))
		if op.Output.N != 0 && op.Output.N != all && !op.Unknown {
			return op, true
		}
		var keys []string
		for _, k := range op.Input.Keys {
			if mine(k) {
				keys = append(keys, k)
			}
		}
		if op.Output.N == all && !op.Unknown {
			op.Output.N = len(distinctKeys(keys))
		}
		op.Input.Keys = keys
	}
	return op, true
}

// distinctKeys returns keys without repeats.
func distinctKeys(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}

// epochsOf returns the epochs of the keys in, sorted, or none for a call
// without a key (Sweep).
func epochsOf(in model.Input) []int64 {
	var out []int64
	add := func(key string) {
		if e, ok := epochOfKey(key); ok && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	var visit func(in model.Input)
	visit = func(in model.Input) {
		add(in.Key)
		for _, k := range in.Keys {
			add(k)
		}
		for _, sub := range in.Ops {
			visit(sub)
		}
	}
	visit(in)
	slices.Sort(out)
	return out
}

// epochOfKey returns the epoch of a key "e<n>/...", or false.
func epochOfKey(key string) (int64, bool) {
	e, _, ok := strings.Cut(key, "/")
	if !ok || !strings.HasPrefix(e, "e") {
		return 0, false
	}
	n, err := strconv.ParseInt(e[1:], 10, 64)
	return n, err == nil
}
