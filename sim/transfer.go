package sim

import (
	"fmt"
	"strings"

	"github.com/statekit/statekit/internal/checks"
	"github.com/statekit/statekit/model"
)

// The transfer workload: beside the verbs, clients move amounts between
// two keys no other call writes, each move one Update (one key decremented,
// the other incremented by as much), and audit the pair, reading both in
// one Update (package checks: Transfer, Audit). Every state a transaction
// leaves has the pair summing to zero, so a read of both in one snapshot
// that finds another sum saw part of a transaction: an Update whose verbs
// committed apart, with a crash, a power loss or another process's commit
// between them. The linearizability check cannot see that: it checks each
// key on its own, and each key alone is a fine history. The atomicity
// check reads the sum wherever both keys are read in one snapshot: every
// audit that answered (checks.Audits over the history: the clients' and
// the verifier's at the end), and the rows every power loss recovered to.
// Transfers and audits go into the history like any call.
//
// Every draw comes from a stream of its own (streamTransfer), so the
// verbs' stream draws what it drew before.

// CheckAtomicity: every snapshot that reads both transfer keys finds them
// summing to zero.
const CheckAtomicity = checks.KindAtomicity

// streamTransfer is the transfer workload's stream.
const streamTransfer uint64 = 0x51a3002

// The transfer workload's shape.
const (
	// transferOneIn: one client operation in transferOneIn, of those the
	// recipes leave, is a transfer or an audit.
	transferOneIn = 8
	// transferMax bounds the amount one transfer moves.
	transferMax = 9
)

// transferKeys are the pair: no other call writes them, nothing gives them
// a deadline.
var transferKeys = []string{"xfer:a", "xfer:b"}

// transferTurn draws whether the next client operation is the transfer
// workload's.
func (w *world) transferTurn() bool { return w.rngTransfer.IntN(transferOneIn) == 0 }

// transferOp has client c of p move an amount from one key of the pair to
// the other, or, one time in three, audit the pair.
func (w *world) transferOp(t *thread, p *process, c *client) {
	r := w.rngTransfer
	if r.IntN(3) == 0 {
		w.audit(t, p, c.id)
		return
	}
	from, to := transferKeys[0], transferKeys[1]
	if r.IntN(2) == 0 {
		from, to = to, from
	}
	n := 1 + r.Int64N(transferMax)
	in := checks.Transfer(from, to, n, r.IntN(2) == 0)
	w.verb(t, p, c.id, &in)
}

// audit reads the pair in one Update, as client c of p; checkAudits judges
// its answer.
func (w *world) audit(t *thread, p *process, c int) {
	in := checks.Audit(transferKeys[0], transferKeys[1])
	w.verb(t, p, c, &in)
}

// checkAudits fails the atomicity check for every audit in the history that
// did not find the pair summing to zero.
func (w *world) checkAudits() {
	isPair := func(a, b string) bool { return a == transferKeys[0] && b == transferKeys[1] }
	for _, v := range checks.Audits(w.history, isPair) {
		w.violate(CheckAtomicity, "%s", v.Detail)
	}
}

// transferRecovered fails the atomicity check when the rows a power loss
// recovered to (s, every transfer key with a row) do not sum to zero.
func (w *world) transferRecovered(s model.State) {
	var sum int64
	var read []string
	for _, k := range transferKeys {
		e, ok := s.KV[k]
		if !ok {
			continue
		}
		v, isInt := checks.PairValue(model.ErrNone, e.Value)
		if !isInt || e.ExpiresAt != 0 {
			w.violate(CheckAtomicity, "the power loss at %d recovered %q as %v expiring at %d: only transfers write it", w.trueMillis, k, e.Value, e.ExpiresAt)
			return
		}
		sum += v
		read = append(read, fmt.Sprintf("%s=%d", k, v))
	}
	if sum != 0 {
		w.violate(CheckAtomicity, "the power loss at %d recovered %s: part of a transfer", w.trueMillis, strings.Join(read, " "))
	}
}
