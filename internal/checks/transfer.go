package checks

import (
	"fmt"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// Transfers: a pair of keys that only transfers write (an Update adding n
// to one and -n to the other, no deadline) sums to zero in every state a
// transaction leaves. An audit reads both in one Update; one that finds
// another sum saw part of a transaction: an Update whose verbs committed
// apart. A check of each key on its own cannot see that.

// Audit returns the Update that reads the pair a, b: a Get of each.
func Audit(a, b string) model.Input {
	return model.Input{Kind: model.Update, Ops: []model.Input{{Kind: model.Get, Key: a}, {Kind: model.Get, Key: b}}}
}

// Transfer returns the Update that moves n from key from to key to: a
// decrement of from and an increment of to, the increment first when
// incrementFirst.
func Transfer(from, to string, n int64, incrementFirst bool) model.Input {
	ops := []model.Input{{Kind: model.IncrBy, Key: from, Delta: -n}, {Kind: model.IncrBy, Key: to, Delta: n}}
	if incrementFirst {
		ops[0], ops[1] = ops[1], ops[0]
	}
	return model.Input{Kind: model.Update, Ops: ops}
}

// PairValue is a pair key's amount as a Get answers it: zero while the key
// has no row, and not ok for anything but an integer.
func PairValue(err model.ErrKind, v model.Value) (int64, bool) {
	switch {
	case err == model.ErrNotFound:
		return 0, true
	case err == model.ErrNone && v.IsInt:
		return v.Int, true
	}
	return 0, false
}

// Audits checks every audit in history that answered (IsAudit): each must
// read integers (or no row) summing to zero.
func Audits(history []linearizability.Op, pair func(a, b string) bool) []Violation {
	var out []Violation
	for _, op := range history {
		if !IsAudit(op, pair) {
			continue
		}
		if len(op.Output.Sub) != 2 {
			out = append(out, Violation{KindAtomicity, fmt.Sprintf("client %d's audit at %d answered %d reads of 2", op.Client, op.Input.NowMillis, len(op.Output.Sub))})
			continue
		}
		if v := auditViolation(op); v != "" {
			out = append(out, Violation{KindAtomicity, v})
		}
	}
	return out
}

// IsAudit reports whether op is an audit that answered: an Update of two
// Gets whose keys pair says are a transfer pair, in that order, that
// returned without an error.
func IsAudit(op linearizability.Op, pair func(a, b string) bool) bool {
	in := op.Input
	return op.Event == linearizability.Verb && !op.Unknown && op.Output.Err == model.ErrNone && in.Kind == model.Update &&
		len(in.Ops) == 2 && in.Ops[0].Kind == model.Get && in.Ops[1].Kind == model.Get && pair(in.Ops[0].Key, in.Ops[1].Key)
}

// auditViolation says what is wrong with the answer of audit op, "" when
// it read integers (or no row) summing to zero.
func auditViolation(op linearizability.Op) string {
	in := op.Input
	var sum int64
	read := ""
	for i, o := range op.Output.Sub {
		v, ok := PairValue(o.Err, o.Value)
		if !ok {
			return fmt.Sprintf("client %d's audit at %d read %q as %v, %v: only transfers write it", op.Client, in.NowMillis, in.Ops[i].Key, o.Value, o.Err)
		}
		sum += v
		read += fmt.Sprintf(" %s=%d", in.Ops[i].Key, v)
	}
	if sum != 0 {
		return fmt.Sprintf("client %d's audit at %d read%s: part of a transfer", op.Client, in.NowMillis, read)
	}
	return ""
}
