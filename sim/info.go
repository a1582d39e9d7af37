package sim

import (
	"slices"
	"strings"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
)

// The info check: statectl info (DB.Stats) against the rows. The
// verifier, alone on the file at the end, reads every key row and every
// lease row (the recipes' too: Stats counts them), then Stats, and holds
// Stats' counts to those rows at the time Stats says it counted at. The
// rows themselves are the verifier's recorded listings' (linearizability
// holds those to the model); only the verifier's own sweeps may change
// the file between the reads, and a sweep deletes only keys past their
// deadline, so every count is exact but the expired keys', which may be
// short by the keys a sweep of the window deleted (or, for a sweep that
// failed or is still running, may have deleted: any key expired at its
// cutoff).

// sweepWatch is what a process's sweeps did while the verifier's info
// check watched them (process.watch).
type sweepWatch struct {
	deleted   []string // keys a sweep statement that succeeded deleted
	cutoffMax int64    // the latest cutoff of a sweep that failed, or was still running at the end; 0 when none
}

// infoCheck reads every row and then Stats through p's handle, and fails
// the info check where they disagree. It reports false when a call failed:
// the faults are off by then, so engine-error judges the error, and one
// that ends the handle stops p.
func (w *world) infoCheck(t *thread, p *process) bool {
	p.watch = &sweepWatch{}
	defer func() { p.watch = nil }()
	before := w.mark()
	var rows []state.KeyInfo
	var leases []state.LeaseInfo
	err := p.db.Scan(w.ctx, "", true, func(k state.KeyInfo) error { rows = append(rows, k); return nil })
	if err == nil {
		err = p.db.Leases(w.ctx, true, func(l state.LeaseInfo) error { leases = append(leases, l); return nil })
	}
	var s state.Stats
	if err == nil {
		s, err = w.info(p)
	}
	if err != nil {
		w.logf("p%d info: %s", p.pid, errClass(err))
		if w.classify(p, "info", err, before) == failDead {
			w.stopOn(t, p, "info failed")
		}
		return false
	}
	watch := *p.watch
	for _, fl := range p.sweeps { // may have deleted already
		watch.cutoffMax = max(watch.cutoffMax, fl.in.NowMillis)
	}
	w.logf("p%d info against %d key rows and %d lease rows: %d keys swept since, sweeps failed or running to cutoff %d",
		p.pid, len(rows), len(leases), len(watch.deleted), watch.cutoffMax)
	swept := func(k state.KeyInfo) bool {
		return slices.Contains(watch.deleted, k.Key) || k.Expires.UnixMilli() <= watch.cutoffMax
	}
	for _, d := range []string{checks.StatsRows(s, rows, leases, swept), checks.WritableMark(s)} {
		if d != "" {
			w.violate(CheckInfo, "p%d: %s", p.pid, d)
		}
	}
	return true
}

// info is statectl info in p: it calls Stats, and fails the info check
// when the answer is unsound on its own (checks.StatsUnsound) or says a time
// other than the one the engine claimed for the call.
func (w *world) info(p *process) (state.Stats, error) {
	claimed := int64(-1)
	s, err := p.db.Stats(hooks.WithNow(w.ctx, func(ms int64) { claimed = ms }))
	if err != nil {
		return s, err
	}
	w.logf("p%d info: %d keys (%d with a deadline), %d expired, %d leases held of %d, at %d",
		p.pid, s.Keys, s.KeysWithDeadline, s.ExpiredKeys, s.Leases, s.LeaseNames, s.Now.UnixMilli())
	if s.Now.UnixMilli() != claimed {
		w.violate(CheckInfo, "p%d: Stats says it counted at %d, but the engine claimed %d for it", p.pid, s.Now.UnixMilli(), claimed)
	}
	if bad := checks.StatsUnsound(s); len(bad) > 0 {
		w.violate(CheckInfo, "p%d: Stats at %d: %s", p.pid, s.Now.UnixMilli(), strings.Join(bad, "; "))
	}
	return s, nil
}
