// Package checks holds the checks statekit's test harnesses make of a
// recorded history besides linearizability: functions over
// []linearizability.Op and plain values, each returning the Violations it
// found, so that the real-process stress run (package stress) and the
// simulator (package sim) hold the engine to the same rules.
//
//   - Fencing: Grants lists the lease grants a history shows, alone or
//     inside an Update that committed; Tokens checks that a token seen by a
//     holder belongs to one owner per lease name and that a grant that
//     began after another returned has a token at least as high; Fence
//     checks what a fenced resource accepted.
//   - Counters: Counter bounds the final value of a key only increments
//     touch, with the durability model of package linearizability (power
//     losses roll back what no durable commit followed); Buffered checks
//     what one handle's flushes took against what its callers buffered.
//   - Clocks: ClockOffset checks that one process's engine time moved with
//     the recorder's clock while it ran; ClockNeverBack checks that no
//     process started at an engine time before one that calls of writable
//     processes ended before it started had used (a read-only process
//     writes no high-water mark: its times bind no later process).
//   - Transfers: Audits checks that every read of a transfer pair in one
//     Update (Audit; only Transfer writes the pair) found it summing to
//     zero: an Update is one transaction.
//   - Stats: StatsUnsound, StatsRows and WritableMark hold what statectl
//     info prints (state.DB.Stats) to itself, to the rows read just
//     before it, and to the handle's own time.
//   - Flush answers: FlushAnswer checks what a Flush or Close returned
//     against the background flushes whose errors it must return once
//     (SplitFlushError tells those apart from the call's own) and its
//     own flush's outcome.
//   - Errors: ErrKind is the one map from an engine error to the model's
//     kind. An error it has no kind for is not an answer the model can
//     check: the caller records the call's outcome as unknown and reports
//     the error unless a fault it injected explains it.
//
// Every check is deterministic: the same history gives the same
// violations, in the same order.
package checks

import "fmt"

// Kinds of violation, for Violation.Kind.
const (
	// KindDuplicateToken: one fencing token went to two owners, or a
	// fenced resource accepted one token from two holders.
	KindDuplicateToken = "duplicate-token"
	// KindTokenOrder: a grant that began after another returned got a
	// lower token, or a resource's accepted tokens went down.
	KindTokenOrder = "token-order"
	// KindFence: a resource accepted a write under a token its writer was
	// never seen to be granted.
	KindFence = "fence"
	// KindCounter: a counter lost or invented an increment, or two
	// increments answered the same value.
	KindCounter = "counter"
	// KindBuffered: a handle's flushes took more buffered increments than
	// its callers buffered, or a clean close left some unwritten.
	KindBuffered = "buffered"
	// KindClock: a process's engine time did not move with the
	// recorder's clock, or started behind a time already used.
	KindClock = "clock"
	// KindAtomicity: an audit of a transfer pair, both keys read in one
	// Update, did not find them summing to zero.
	KindAtomicity = "atomicity"
	// KindInfo: statectl info's counts (state.DB.Stats) were not the
	// rows', or its answer was unsound on its own.
	KindInfo = "info"
	// KindFlushAnswer: a Flush or Close did not return, once, the errors
	// of the background flushes that lost deltas before it, or misstated
	// its own flush's outcome.
	KindFlushAnswer = "flush-answer"
)

// Violation is one broken promise.
type Violation struct {
	Kind   string // one of the Kind constants
	Detail string // what broke, naming the operations involved
}

// String returns the violation as "kind: detail".
func (v Violation) String() string { return v.Kind + ": " + v.Detail }

func violation(kind, format string, args ...any) Violation {
	return Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
