// Package linearizability checks recorded statekit histories against the
// sequential specification in package model, with porcupine.
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
// commit durable) or a Durable event. The porcupine model of a partition is
// therefore nondeterministic: its state is the current state plus the set
// of candidate states a power loss may roll back to (the state at the last
// durable point and after each later NORMAL write). A NORMAL write adds a
// candidate, a durable point collapses the set to the current state, and a
// PowerLoss continues from any candidate.
//
// When the recorder read the rows the file recovered to after a power loss
// (Op.Recovered), each partition it names is held to its row: the PowerLoss
// continues from that row, and fails when it is no candidate. The state
// then keeps, beside the current row, only whether that row is a
// candidate, so every order of the same commits that passes it is one
// state, where each order was a set of candidates of its own.
//
// Porcupine searches over sets of such states (the partition may be in any
// of them after the operations linearized so far). The package builds
// those sets itself rather than with porcupine's NondeterministicModel:
// each state and each set is interned, so that equal sets are one pointer
// for porcupine's cache to compare, and each step taken from a set is
// remembered on it, since porcupine steps the same set with the same
// operation again each time it backtracks.
//
// # Unknown outcomes
//
// An Op with Unknown set (a crash or power loss hid its answer) accepts any
// answer and may or may not have taken effect. Its porcupine return is after
// every other event, or the time the recorder saw its process dead (Op.Return
// when greater than Op.Call), and never later than just before the first
// PowerLoss after its call: nothing a process started runs after the power
// went out. Keep unknown outcomes few and bounded: each doubles the states
// to search while it is open. A read (Get, TTL, an Update that only reads or
// aborts) whose answer was lost is left out: it changed nothing and is checked against nothing, so it fits
// anywhere in its interval.
//
// # Partitions and what they do not check
//
// The history is split by key: "k:"+key for key rows and "l:"+name for
// leases, checked one at a time in sorted order. A verb on several keys (Del
// of several keys, an Update, a buffered-increment Flush) is projected into
// each key's partition with the same call and return times; Del's count
// checks each key only when it is 0 or the number of distinct keys. Sweep
// goes to every key partition, its count checked only when it is 0. PowerLoss
// and Durable events go to every partition, and every committed FULL write is
// also a Durable event in every other partition.
//
// Per-key projection does not check anything across keys: that a multi-key
// Update or Del was atomic (each key's part may linearize at a different
// point of its interval, or, for an unknown outcome, apply in one partition
// and not in another), that a Del or Sweep count adds up over keys, nor that
// the prefixes chosen at a power loss are the same prefix in every
// partition. Those need a whole-history model, exponentially slower.
package linearizability
