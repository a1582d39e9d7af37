package sim

import (
	"fmt"
	"slices"
	"strings"

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
	if d := infoDisagrees(s, rows, leases, watch); d != "" {
		w.violate(CheckInfo, "p%d: %s", p.pid, d)
	}
	// A writable handle keeps a mark at or after every time it used, at
	// most a lead ahead; every other mark is at or before the time it
	// started at.
	if hw, now := s.HighWater.UnixMilli(), s.Now.UnixMilli(); hw < now || hw > now+state.HighWaterLead.Milliseconds() {
		w.violate(CheckInfo, "p%d: Stats' high-water mark %d is not between its time %d and %v after it", p.pid, hw, now, state.HighWaterLead)
	}
	return true
}

// info is statectl info in p: it calls Stats, and fails the info check
// when the answer is unsound on its own (statsUnsound) or says a time
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
	if bad := statsUnsound(s); len(bad) > 0 {
		w.violate(CheckInfo, "p%d: Stats at %d: %s", p.pid, s.Now.UnixMilli(), strings.Join(bad, "; "))
	}
	return s, nil
}

// statsUnsound lists what is wrong with s on its own, whatever the rows.
func statsUnsound(s state.Stats) []string {
	var bad []string
	if s.SchemaVersion != state.SchemaVersion {
		bad = append(bad, fmt.Sprintf("schema version %d, want %d", s.SchemaVersion, state.SchemaVersion))
	}
	if s.KeysWithDeadline < 0 || s.KeysWithDeadline > s.Keys || s.ExpiredKeys < 0 {
		bad = append(bad, fmt.Sprintf("%d live keys, %d of them with a deadline, %d expired", s.Keys, s.KeysWithDeadline, s.ExpiredKeys))
	}
	if s.Leases < 0 || s.Leases > s.LeaseNames {
		bad = append(bad, fmt.Sprintf("%d leases held of %d", s.Leases, s.LeaseNames))
	}
	if want := max(0, s.HighWater.Sub(s.Wall)-state.HighWaterLead); s.ClockBehind != want {
		bad = append(bad, fmt.Sprintf("the clock %v behind, want %v (the mark %d, the wall clock %d)",
			s.ClockBehind, want, s.HighWater.UnixMilli(), s.Wall.UnixMilli()))
	}
	if s.PageSize <= 0 || s.Pages <= 0 || s.FreePages < 0 || s.FreePages > s.Pages {
		bad = append(bad, fmt.Sprintf("%d pages of %d bytes, %d free", s.Pages, s.PageSize, s.FreePages))
	}
	return bad
}

// infoDisagrees says how s disagrees with rows and leases, every key row
// and lease row of the file read just before it, given what sweeps did
// between (watch); "" when it agrees.
func infoDisagrees(s state.Stats, rows []state.KeyInfo, leases []state.LeaseInfo, watch sweepWatch) string {
	now := s.Now.UnixMilli()
	var live, deadline, expired, mayBeGone, held int64
	for _, k := range rows {
		switch {
		case k.Expires.IsZero():
			live++
		case k.Expires.UnixMilli() > now:
			live++
			deadline++
		default:
			expired++
			if slices.Contains(watch.deleted, k.Key) || k.Expires.UnixMilli() <= watch.cutoffMax {
				mayBeGone++
			}
		}
	}
	for _, l := range leases {
		if !l.Expires.IsZero() && l.Expires.UnixMilli() > now {
			held++
		}
	}
	var bad []string
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"live keys", s.Keys, live},
		{"live keys with a deadline", s.KeysWithDeadline, deadline},
		{"leases held", s.Leases, held},
		{"lease names", s.LeaseNames, int64(len(leases))},
	} {
		if c.got != c.want {
			bad = append(bad, fmt.Sprintf("%s %d, the rows say %d", c.what, c.got, c.want))
		}
	}
	if s.ExpiredKeys > expired || s.ExpiredKeys < expired-mayBeGone {
		bad = append(bad, fmt.Sprintf("expired keys %d, the rows say %d (%d of them may have been swept since)", s.ExpiredKeys, expired, mayBeGone))
	}
	bad = append(bad, statsUnsound(s)...)
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("Stats at %d disagrees with the %d key rows and %d lease rows read just before: %s",
		now, len(rows), len(leases), strings.Join(bad, "; "))
}
