package state

import (
	"errors"
	"runtime"
)

// A group that holds lease grants and other verbs runs in two transactions:
// the other verbs first, committed NORMAL and answered at once, then the
// grants, committed FULL, together with whatever their callers' neighbours
// queued meanwhile. The verbs of a group were all called before it ran and
// none was answered, so any order of them is one they could have run in;
// the first transaction's NORMAL commit promises what each of its verbs
// asked for, and the grants' FULL commit syncs the WAL and with it the
// first transaction too, so a grant still leaves every commit before it
// durable.
//
// Why: a verb that asked for no sync is not made to wait for one. Goroutines
// that each grant and then release a lease would otherwise take turns at a
// sync: the releases of one group waited for the grants' sync beside them,
// and their callers' next grants for the sync after that. Answered early,
// those callers queue their next grants while the leader yields, and those
// grants share this group's sync: a sync then serves a grant of every
// goroutine rather than about half of them.

// splitGrants returns the verbs of ops that ask for no sync and those that
// do, when ops must commit FULL for its grants (fullGroup) and holds both
// kinds; otherwise normal is nil and ops runs as one group.
func (db *DB) splitGrants(ops []*pending) (normal, full []*pending) {
	if len(ops) < 2 || !db.fullGroup(ops) {
		return nil, nil
	}
	for _, o := range ops {
		if o.full {
			full = append(full, o)
		} else {
			normal = append(normal, o)
		}
	}
	if len(full) == 0 { // fullGroup said there is one
		return nil, nil
	}
	return normal, full
}

// gatherYields bounds the times gatherGrants yields.
const gatherYields = 16

// gatherYield lets other goroutines run, for gatherGrants. Which goroutine
// runs in a yield is the Go scheduler's choice, so a test replaces it with
// one that queues a grant, as a caller that runs then would.
var gatherYield = runtime.Gosched

// runSplit runs normal as a group of its own and answers it, lets the
// callers it answered queue their next verbs, and runs full with the
// grouped verbs queued by then as one FULL group, whatever they are.
// Callers hold mu.
func (db *DB) runSplit(normal, full []*pending) {
	defer func() {
		for _, o := range full {
			if o.state.Load() != opDone { // the first group panicked
				o.finish(errors.New("statekit: a verb run in the same group panicked"))
			}
		}
	}()
	db.runOne(normal)
	// Each caller just answered may grant again (a worker that releases
	// one lease and claims the next): wait for as many grants as there
	// were callers. One yield let about half of them in: the goroutines
	// fell into two cohorts, each syncing apart.
	db.runOne(db.gatherGrants(full, len(normal))) // not split again: the grants wait for one group at most
}

// gatherGrants lets the callers about to grant queue their grants before
// ops, which must commit FULL, runs, and returns ops with the grouped
// verbs queued by then (up to maxGroup in all), so that their grants share
// its sync: a yield costs a microsecond, a sync of the disk a hundred or
// more. It yields until want grants are queued or, with want 0 (how many
// are coming is not known), until a yield brings no new one; at most
// gatherYields times. Under a scheduler it yields once.
//
// Why want 0 yields at all: a leader whose verb was a release returns to
// its caller while the callers it answered are only waking up; that
// caller's next grant finds the lock free and would run alone, and the
// others' grants queue behind its sync for one of their own. Eight
// goroutines granting and releasing made 4.5 grants a sync without the
// yield and 7.6 with it.
func (db *DB) gatherGrants(ops []*pending, want int) []*pending {
	if s := db.cfg.sched; s != nil {
		s.Wait(nil)
	} else {
		seen := db.q.grantsQueued()
		for i := 0; i < gatherYields && (want == 0 || seen < want); i++ {
			gatherYield()
			n := db.q.grantsQueued()
			if want == 0 && n == seen {
				break
			}
			seen = n
		}
	}
	return append(ops, db.q.takeUpTo(maxGroup-len(ops), nil)...)
}
