// Package bugs names the planted bugs that statekit's simulator and stress
// tests compile into the engine, off by default, to prove that their checks
// can fail. Only packages of this module can import it, so no application can
// turn one on.
package bugs

import (
	"fmt"
	"sort"
	"strings"
)

// Bug is one planted bug.
type Bug uint32

// The planted bugs. Each makes the engine wrong in one specific way.
const (
	// LeaseNormalSync commits lease grants with synchronous=NORMAL, so a
	// power loss can roll a grant back and hand its token out twice.
	LeaseNormalSync Bug = 1 << iota
	// ReleaseDeletes deletes the lease row on release, so the next grant
	// restarts at token 1.
	ReleaseDeletes
	// IncrTwoStatements increments, then sets the TTL in a second
	// autocommit statement, so a crash between them leaves a counter that
	// never expires.
	IncrTwoStatements
	// NoHWM ignores the high-water mark at open: time restarts from the
	// wall clock even when it is behind the mark.
	NoHWM
	// RenewBumpsToken gives a renewed lease a new token.
	RenewBumpsToken
	// ReadIgnoresDeadline makes Get return expired keys.
	ReadIgnoresDeadline
	// SweepEarly makes a sweep delete keys one millisecond before their
	// deadline.
	SweepEarly
	// CASIgnoresType makes CAS compare values as text, so int 7 matches "7".
	CASIgnoresType
	// LeaseTwoStatements grants a lease by reading the row and writing it
	// in two autocommit statements, outside any transaction.
	LeaseTwoStatements
	// GroupEarlyAnswer answers the verbs of a group commit before its
	// COMMIT has run.
	GroupEarlyAnswer
	// GroupErrorLeak gives a grouped verb's statement error to the next
	// verb of its group, and hides it from its own.
	GroupErrorLeak
	// CheckpointAfterFailedSync has a handle that failed (a sync, say) ask
	// its background checkpointer for one more checkpoint, which goes on
	// on a connection it opens afresh (which the failure is not reported
	// to).
	CheckpointAfterFailedSync
	// FlushLosesConcurrent puts a failed flush's deltas back into the
	// buffer by overwriting, so increments buffered meanwhile vanish.
	FlushLosesConcurrent
	// GroupedGrantEarly answers the lease grants of a group commit before
	// the group's COMMIT, and so its FULL sync, has run: a crash or power
	// loss then can take back a token its caller holds.
	GroupedGrantEarly
	// SweepStaleDelete makes a sweep choose its rows in one turn and
	// delete them by rowid in its next, without reading their deadline
	// again: a write that made one of them live again between the two
	// turns (Set, Incr, CAS, Expire on an expired key) loses it.
	SweepStaleDelete
	// LimiterTwoSteps makes every limiter of package ratelimit read its
	// state in one call and write it in another, so that two callers that
	// read the same state are both allowed (a recipe bug: it needs
	// internal/recipehooks in the call's context, not the engine's hooks).
	LimiterTwoSteps
	// CacheWritesAfterLost makes a cache fill write its value with a plain
	// Set and then release its lease, so a caller whose lease lapsed
	// mid-compute overwrites the newer holder's value (a recipe bug, as
	// LimiterTwoSteps).
	CacheWritesAfterLost
	// SyncFullUnsynced answers a SyncFull handle's commits without the
	// engine's sync of the WAL after them: a power loss then takes back
	// writes their callers were told are durable.
	SyncFullUnsynced
	// LossCheckEveryPage makes the check for writes a failed sync took
	// back compare every page a checkpoint copied into the database file
	// with its last frame under the backfill mark, pages with a later
	// frame too: a checkpoint that a reader's snapshot stopped short leaves
	// those older in the file, so the check finds a loss on a file system
	// that lost nothing and has every connection rebuild the shared index.
	LossCheckEveryPage
	// ReadOnlyNoHWM ignores the high-water mark at the open of a read-only
	// handle (statectl's reads): its time starts from the wall clock, which
	// may be behind times writers used, so it reads keys as live that
	// expired at a time already used.
	ReadOnlyNoHWM
	// ScanIgnoresDeadline makes Scan (statectl dump) list expired keys
	// that no sweep has deleted yet as live ones.
	ScanIgnoresDeadline
	// StatsCountsExpired makes Stats (statectl info) count the keys past
	// their deadline that no sweep has deleted yet as live ones.
	StatsCountsExpired
	// UpdateCommitsEach commits an Update's transaction after each of its
	// verbs and begins another: a crash, a power loss or another
	// process's commit can come between two of them.
	UpdateCommitsEach
	// EmptyFlushSkipsLost has a Flush with nothing buffered return nil at
	// once, before it takes the errors background flushes kept for it:
	// a background flush's dropped delta goes unreported until a later
	// Flush that has deltas of its own.
	EmptyFlushSkipsLost
	// FlushSkipsWait has a Flush that finds a background flush in flight
	// go ahead without waiting for it: it returns while the deltas that
	// flush took, buffered before the call, are not written yet.
	FlushSkipsWait
	// SweepCountsLast has Sweep return the keys its last transaction
	// deleted instead of all it deleted.
	SweepCountsLast
	// DelCountsExpired has a Del of several keys count every row it
	// deletes, the expired ones no sweep has deleted yet too, as a Del
	// that counts the rows its DELETE changed would.
	DelCountsExpired
	// ClaimBeforeLock has a verb claim its engine time when it is called,
	// before it takes the handle's lock (or joins the queue of a group
	// commit), and run at that time once it has the lock: a verb that
	// waited behind others runs at a time before theirs, and judges
	// expiry by it.
	ClaimBeforeLock
	// NowReadsWall makes DB.Now answer the wall clock instead of the
	// engine's time: after a wall-clock step, or with a high-water mark
	// ahead of the wall clock at open, a rate limiter places its decisions
	// at times the engine never ran at.
	NowReadsWall
	// CASTTLKeepsDeadline makes a CAS with a TTL that swaps an existing
	// value keep the key's old deadline instead of setting the new one.
	CASTTLKeepsDeadline
	// CASSwapClearsDeadline makes a CAS without a TTL that swaps a value
	// clear the key's deadline instead of keeping it.
	CASSwapClearsDeadline
	lastBug
)

var names = map[Bug]string{
	LeaseNormalSync:     "lease-normal-sync",
	ReleaseDeletes:      "release-deletes",
	IncrTwoStatements:   "incr-two-statements",
	NoHWM:               "no-hwm",
	RenewBumpsToken:     "renew-bumps-token",
	ReadIgnoresDeadline: "read-ignores-deadline",
	SweepEarly:          "sweep-early",
	CASIgnoresType:      "cas-ignores-type",
	LeaseTwoStatements:  "lease-two-statements",

	GroupEarlyAnswer:          "group-early-answer",
	GroupErrorLeak:            "group-error-leak",
	CheckpointAfterFailedSync: "checkpoint-after-failed-sync",
	FlushLosesConcurrent:      "flush-loses-concurrent",
	GroupedGrantEarly:         "grouped-grant-early",
	SweepStaleDelete:          "sweep-stale-delete",
	LimiterTwoSteps:           "limiter-two-steps",
	CacheWritesAfterLost:      "cache-writes-after-lost",
	SyncFullUnsynced:          "sync-full-unsynced",
	LossCheckEveryPage:        "loss-check-every-page",
	ReadOnlyNoHWM:             "readonly-no-hwm",
	ScanIgnoresDeadline:       "scan-ignores-deadline",
	StatsCountsExpired:        "stats-counts-expired",
	UpdateCommitsEach:         "update-commits-each",
	EmptyFlushSkipsLost:       "empty-flush-skips-lost",
	FlushSkipsWait:            "flush-skips-wait",
	SweepCountsLast:           "sweep-counts-last",
	DelCountsExpired:          "del-counts-expired",
	ClaimBeforeLock:           "claim-before-lock",
	NowReadsWall:              "now-reads-wall",
	CASTTLKeepsDeadline:       "cas-ttl-keeps-deadline",
	CASSwapClearsDeadline:     "cas-swap-clears-deadline",
}

// String returns the bug's pinned name, such as "lease-normal-sync".
func (b Bug) String() string {
	if n, ok := names[b]; ok {
		return n
	}
	return fmt.Sprintf("bug(%d)", uint32(b))
}

// Set is a set of planted bugs; the zero Set plants none.
type Set struct{ mask uint32 }

// Has reports whether b is planted.
func (s Set) Has(b Bug) bool { return s.mask&uint32(b) != 0 }

// With returns s with b planted too.
func (s Set) With(b Bug) Set { return Set{mask: s.mask | uint32(b)} }

// Empty reports whether no bug is planted.
func (s Set) Empty() bool { return s.mask == 0 }

// String lists the planted bugs' names, comma separated, sorted.
func (s Set) String() string {
	var out []string
	for b := Bug(1); b < lastBug; b <<= 1 {
		if s.Has(b) {
			out = append(out, b.String())
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Names returns every bug's name, sorted.
func Names() []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Parse returns the bug named name, or an error listing the known names.
func Parse(name string) (Bug, error) {
	for b, n := range names {
		if n == name {
			return b, nil
		}
	}
	return 0, fmt.Errorf("unknown planted bug %q (known: %s)", name, strings.Join(Names(), ", "))
}
