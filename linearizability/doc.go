// Package linearizability checks recorded statekit histories against the
// sequential specification in package model.
//
// A history is a []Op: the verbs clients called (call and return times from
// one clock all recorders share, the engine time each call used, what it
// answered, and whether its commit was NORMAL or FULL), plus two kinds of
// events: PowerLoss (the machine lost power at a time) and Durable (a FULL
// commit not in the history happened within an interval).
//
// # Durability model
//
// After a power loss, the state is the one after some prefix of the
// committed writes that reaches at least the last durable point. A durable
// point is a FULL write that committed (it makes itself and every earlier
// commit durable) or a Durable event. The model of a partition is
// therefore nondeterministic: its state is the current state plus the set
// of candidate states a power loss may roll back to (the state at the last
// durable point and after each later NORMAL write). A NORMAL write adds a
// candidate, a durable point collapses the set to the current state, and a
// PowerLoss continues from any candidate.
//
// When the recorder read the rows the file recovered to after a power loss
// (Op.Recovered), each partition it names is held to its row: the PowerLoss
// continues from that row, and fails when it is no candidate. A key or
// lease it names that no call touched is a partition too, whose only
// candidate is absent. The state
// then keeps, beside the current row, only whether that row is a
// candidate, so every order of the same commits that passes it is one
// state, where each order was a set of candidates of its own.
//
// # The search
//
// Each partition is searched as porcupine searches (Wing and Gong's
// algorithm as Lowe refined it, caching each pair of operations linearized
// and states reached), with one rule porcupine cannot know: an operation
// that may come next and leaves every state the partition may be in as it
// was (a read answering as each state would, a write whose answer says it
// wrote nothing, a durable point with nothing to make durable) is
// linearized at once, never left for later (search.go says why that loses
// no linearization). Without it, each such operation pending doubled the
// search, and a key read and written by many goroutines at once ran out of
// time. When a partition has no linearization, porcupine searches it
// again for what the failure shows: the longest linearizable prefixes and
// its interactive view (Result.WriteHTML). Tests give both searches the
// same histories and require the same verdicts.
//
// The search is over sets of such states (the partition may be in any of
// them after the operations linearized so far). The package builds those
// sets itself rather than with porcupine's NondeterministicModel:
// each state and each set is interned, so that equal sets are one pointer
// for the search's cache to compare, and each step taken from a set is
// remembered on it, since the search steps the same set with the same
// operation again each time it backtracks.
//
// # Unknown outcomes
//
// An Op with Unknown set (a crash or power loss hid its answer) accepts any
// answer and may or may not have taken effect. Its return, for the search, is after
// every other event, or the time the recorder saw its process dead (Op.Return
// when greater than Op.Call), and never later than just before the first
// PowerLoss after its call: nothing a process started runs after the power
// went out. A PowerLoss the processes survived (Op.Survived: a file system
// that dropped a failed sync's writes took back what was not durable, and
// every process went on) rolls the state back as any PowerLoss does, but
// ends no call: an Unknown op in flight at it may take effect after it, and
// a known outcome may return after it. Keep unknown outcomes few and bounded: each doubles the states
// to search while it is open. A read (Get, TTL, Scan, Leases, an Update that only reads or
// aborts) whose answer was lost is left out: it changed nothing and is checked against nothing, so it fits
// anywhere in its interval. So is a call the spec refuses in every state
// (model.Refuses): it changed nothing either.
//
// # A handle's order
//
// A store handle that claims each call's engine time under its lock, and
// applies the call in the same hold of it, applies its calls in the order
// of their times. Op.Handle and Op.Claimed record it: the check takes such
// a call as taking effect no earlier than its claim, and no later than just
// before the claim of any call of its handle with a later time, by
// narrowing the call's interval before the search (handle.go). Both
// searches see the narrowed intervals. Calls of different handles, and
// calls of one handle at the same time (a group commit's), stay ordered by
// their intervals alone. A history whose handle claimed a later time before
// an earlier one is Illegal before any search.
//
// # Partitions and what they do not check
//
// The history is split by key: "k:"+key for key rows and "l:"+name for
// leases, checked one at a time in sorted order. Key rows whose keys share
// a hash tag, as Redis Cluster finds one (the text between the first "{"
// and the first "}" after it, when not empty: "{t}a" and "{t}b"), are one
// partition, "g:"+tag, checked as a whole. A verb on several partitions
// (Del of several keys, an Update, a buffered-increment Flush) is
// projected into each with the same call and return times, as the same
// verb on the keys it holds there; Del's count checks a part only when the
// part is the whole Del, or the count is 0 or the number of distinct keys,
// and a Del in an Update that the spec refuses for a bad key goes only to
// the partitions of the keys it is refused for (it deletes none of the
// others). Sweep
// goes to every key partition, its count checked only when it is 0. A Scan
// goes to every key partition with its prefix and to every key it listed,
// each checked against the row listed for it (none if left out; in a group,
// a part for each key, checked against that key's row alone); Leases goes
// to the lease partitions the same way; that a listing's rows are in byte
// order, which no one partition sees, is checked before. PowerLoss
// and Durable events go to every partition, and every committed FULL write is
// also a Durable event in every other partition.
//
// Per-key projection does not check anything across partitions: that a
// listing shows every key at one moment (the engine does not promise it: it
// reads a page of rows at a time), that a multi-key Update or Del was
// atomic (each partition's part may linearize at a different point of its
// interval, or, for an unknown outcome, apply in one partition and not in
// another), that a Del or Sweep count adds up over partitions, nor that the
// prefixes chosen at a power loss are the same prefix in every partition.
// Within a group all of that is checked, a listing excepted: a group is
// one state, and the search's cost grows with the calls in flight on it
// together, so a recorder groups the few keys whose multi-key verbs it
// wants checked whole, and leaves the rest one key a partition.
package linearizability
