package sim

import (
	"context"
	"slices"
	"time"

	"github.com/statekit/statekit/internal/drive"
	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
	"github.com/statekit/statekit/state"
)

// recovered reads the clients' keys and leases as a recovery after the
// power loss just taken finds them, for the PowerLoss op
// (linearizability.Op.Recovered): the linearizability check then holds
// each partition to the row it actually recovered to, which must be one a
// power loss may roll back to, instead of trying each of those rows. The
// recipes' keys are left out: their writes are not all in the history.
//
// It reads a copy of the disk (faults.MemFS.Copy) with a read-only handle,
// from the simulator's own goroutine, before any process restarts: the
// machine's disk, locks and shared memory stay as the cut left them, and
// nothing is scheduled. The processes' first open recovers the same rows
// from the same bytes. It returns nil when the copy cannot be read (no
// file yet, or one without the schema): the check then tries every row.
func (w *world) recovered() *linearizability.Recovery {
	cp := w.m.Copy(w.cfg.Seed)
	wall := time.UnixMilli(w.wallMillis())
	db, err := state.Open(dbPath, state.WithFS(cp.Process(0)), state.WithReadOnly(),
		state.WithClock(fixedClock{wall}))
	w.schemaSeen = !openRefused(err) // what a read-only open after it may find
	if err != nil {
		w.logf("recovered rows: unread (%s)", errClass(err))
		return nil
	}
	defer db.Close()
	ctx := context.Background()
	keys := w.modelledKeys()
	s := model.NewState()
	err = db.Scan(ctx, "", true, func(k state.KeyInfo) error {
		if !slices.Contains(keys, k.Key) {
			return nil // a recipe's: not every change of it is in the history
		}
		e := model.Entry{Value: drive.Value(k.Value)}
		if !k.Expires.IsZero() {
			e.ExpiresAt = k.Expires.UnixMilli()
		}
		s.KV[k.Key] = e
		return nil
	})
	if err == nil {
		err = db.Leases(ctx, true, func(l state.LeaseInfo) error {
			if !slices.Contains(w.leases, l.Name) {
				return nil
			}
			row := model.LeaseRow{Owner: l.Owner, Token: l.Token}
			if !l.Expires.IsZero() {
				row.ExpiresAt = l.Expires.UnixMilli()
			}
			s.Leases[l.Name] = row
			return nil
		})
	}
	if err != nil {
		w.logf("recovered rows: unread (%s)", errClass(err))
		return nil
	}
	w.logf("recovered rows: %d keys, %d leases", len(s.KV), len(s.Leases))
	w.transferRecovered(s)
	return &linearizability.Recovery{Keys: keys, Leases: slices.Clone(w.leases), State: s}
}

// fixedClock is a state.Clock that always reads one time.
type fixedClock struct{ t time.Time }

func (c fixedClock) Wall() time.Time          { return c.t }
func (c fixedClock) Monotonic() time.Duration { return 0 }
