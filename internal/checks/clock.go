package checks

import (
	"cmp"
	"slices"

	"github.com/statekit/statekit/linearizability"
)

// Process is one run of a process: its name for messages, when it started
// on the recorder's clock (before it opened the file), and the ops it
// made. An op's Input.NowMillis is the engine time it ran at; 0 means the
// recorder does not know it (such ops are skipped).
type Process struct {
	Name  string
	Start int64
	Ops   []linearizability.Op
	// ReadOnly says the process's handle was opened read-only: it writes
	// no high-water mark, so the times its calls used are not ones a later
	// process must start after. (A read-only handle that started from a
	// killed writer's mark, up to its lead ahead of the wall clock, runs
	// ahead of the wall clock, and a writable one that opens later, at the
	// larger of the wall clock and the marks, may start behind it.) Its own
	// calls are still held to the times writable processes used before it
	// started.
	ReadOnly bool
}

// bounded reports whether op's engine time lies within [Call, Return]: it
// has a time, and its return (or the time its process was seen dead) is
// after its call.
func bounded(op linearizability.Op) bool {
	return op.Event == linearizability.Verb && op.Input.NowMillis != 0 && op.Return > op.Call
}

// ClockOffset checks that a process's engine time moved with the
// recorder's clock while it ran: a handle's time is a fixed base advanced
// by the monotonic clock, so when the recorder's clock is that same
// monotonic clock (CLOCK_MONOTONIC, in units of unitsPerMilli a
// millisecond), one offset C fits every op: an op that ran at engine time
// now somewhere within [call, return] has now*u - return <= C < now*u + u -
// call. It reports a violation naming two ops no one offset fits. An op
// whose outcome is unknown and whose return is not bounded only bounds C
// from above.
//
// It does not apply to a clock that stands still between calls (the
// stress run's stepped clock, a simulator's virtual time).
func ClockOffset(p Process, unitsPerMilli int64) []Violation {
	u := unitsPerMilli
	var lo, hi int64
	loAt, hiAt := -1, -1
	for i, op := range p.Ops {
		if op.Event != linearizability.Verb || op.Input.NowMillis == 0 {
			continue
		}
		now := op.Input.NowMillis * u
		if op.Return > op.Call {
			if l := now - op.Return; loAt < 0 || l > lo {
				lo, loAt = l, i
			}
		}
		if h := now + u - op.Call; hiAt < 0 || h < hi {
			hi, hiAt = h, i
		}
	}
	if loAt < 0 || hiAt < 0 || lo < hi {
		return nil
	}
	a, b := p.Ops[loAt], p.Ops[hiAt]
	return []Violation{violation(KindClock,
		"%s: engine time did not move with the monotonic clock: %s ran at %d within [%d,%d] and %s at %d within [%d,%d]; no fixed offset fits both (%d ms apart)",
		p.Name, a.Input.Kind, a.Input.NowMillis, a.Call, a.Return, b.Input.Kind, b.Input.NowMillis, b.Call, b.Return, (lo-hi)/u+1)}
}

// ClockNeverBack checks that no process ran at an engine time before one
// that a call which returned before the process started had used: the
// file's high-water mark carries time across restarts and kills. Only calls
// whose outcome is known count as having used their time: the engine tells
// a call its time as it claims it, before it writes the mark that covers
// it, so a call cut in between used a time no mark covers (and never ran).
// Nor do the calls of a ReadOnly process, which writes no mark. Every op of
// a process, a ReadOnly one's included, known or not, must be at or after
// the times used before it started. Processes are checked in the order
// given; each is reported at most once.
func ClockNeverBack(procs []Process) []Violation {
	type used struct {
		ret, now int64
		proc     string
	}
	var all []used
	for _, p := range procs {
		if p.ReadOnly {
			continue // its times bind no later process: it left them in no mark
		}
		for _, op := range p.Ops {
			if bounded(op) && !op.Unknown {
				all = append(all, used{op.Return, op.Input.NowMillis, p.Name})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b used) int { return cmp.Compare(a.ret, b.ret) })
	// latest[i] is the entry with the highest now among all[:i+1].
	latest := make([]used, len(all))
	for i, u := range all {
		latest[i] = u
		if i > 0 && latest[i-1].now >= u.now {
			latest[i] = latest[i-1]
		}
	}
	var out []Violation
	for _, p := range procs {
		n, _ := slices.BinarySearchFunc(all, p.Start, func(u used, start int64) int { return cmp.Compare(u.ret, start) })
		if n == 0 {
			continue
		}
		before := latest[n-1]
		for _, op := range p.Ops {
			if op.Event == linearizability.Verb && op.Input.NowMillis != 0 && op.Input.NowMillis < before.now {
				out = append(out, violation(KindClock, "%s, started at %d, ran %s at engine time %d, %d ms before time %d that %s had used in a call that returned at %d",
					p.Name, p.Start, op.Input.Kind, op.Input.NowMillis, before.now-op.Input.NowMillis, before.now, before.proc, before.ret))
				break
			}
		}
	}
	return out
}
