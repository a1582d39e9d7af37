package checks

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

// Grant is a lease grant a holder saw: a Lease that answered a token, alone
// or inside an Update that committed.
type Grant struct {
	Name, Owner  string
	Client       int   // the op's client
	Token        int64 // the token it answered
	Call, Return int64 // the op's call and return times
	Index        int   // the op's index in the history
	InUpdate     bool  // granted inside an Update
}

// Grants returns the grants of history, in history order. A grant whose
// answer was lost (an unknown outcome) is not one: no holder saw it.
func Grants(history []linearizability.Op) []Grant {
	var out []Grant
	add := func(i int, op linearizability.Op, in model.Input, o model.Output, inUpdate bool) {
		if in.Kind == model.Lease && o.Err == model.ErrNone {
			out = append(out, Grant{Name: in.Key, Owner: in.Owner, Client: op.Client, Token: o.Token,
				Call: op.Call, Return: op.Return, Index: i, InUpdate: inUpdate})
		}
	}
	for i, op := range history {
		if op.Event != linearizability.Verb || op.Unknown {
			continue
		}
		add(i, op, op.Input, op.Output, false)
		if op.Input.Kind == model.Update && op.Output.Err == model.ErrNone {
			for j, sub := range op.Input.Ops {
				if j < len(op.Output.Sub) {
					add(i, op, sub, op.Output.Sub[j], true)
				}
			}
		}
	}
	return out
}

// Tokens checks the fencing promises of grants: per lease name, a token
// belongs to one owner (the same owner asking again keeps its token), and a
// grant that began after another returned has a token at least as high.
// Call and return times must come from one clock.
func Tokens(grants []Grant) []Violation {
	var out []Violation
	owners := map[string]map[int64][]string{}
	for _, g := range grants {
		if owners[g.Name] == nil {
			owners[g.Name] = map[int64][]string{}
		}
		if !slices.Contains(owners[g.Name][g.Token], g.Owner) {
			owners[g.Name][g.Token] = append(owners[g.Name][g.Token], g.Owner)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(owners)) {
		for _, token := range slices.Sorted(maps.Keys(owners[name])) {
			if o := owners[name][token]; len(o) > 1 {
				out = append(out, violation(KindDuplicateToken, "lease %q: token %d granted to %s", name, token, strings.Join(o, " and ")))
			}
		}
	}

	// Sweep the grants in call order, keeping per name the highest token
	// among the grants that returned before the current one was called.
	byCall := slices.Clone(grants)
	slices.SortStableFunc(byCall, func(a, b Grant) int { return cmp.Compare(a.Call, b.Call) })
	byRet := slices.Clone(grants)
	slices.SortStableFunc(byRet, func(a, b Grant) int { return cmp.Compare(a.Return, b.Return) })
	highest := map[string]Grant{}
	j := 0
	for _, g := range byCall {
		for ; j < len(byRet) && byRet[j].Return < g.Call; j++ {
			if h, ok := highest[byRet[j].Name]; !ok || byRet[j].Token > h.Token {
				highest[byRet[j].Name] = byRet[j]
			}
		}
		if h, ok := highest[g.Name]; ok && g.Token < h.Token {
			out = append(out, violation(KindTokenOrder, "lease %q: %s got token %d (op #%d) after %s had got token %d (op #%d)",
				g.Name, g.Owner, g.Token, g.Index, h.Owner, h.Token, h.Index))
		}
	}
	return out
}

// FenceWrite is one write a fenced resource was offered: by Holder (a
// lease owner) under Token for the lease Name, accepted or refused.
type FenceWrite struct {
	Name, Holder string
	Token        int64
	Accepted     bool
}

// Fence checks a fenced resource's writes, in the order it took them: per
// name, the tokens it accepted never go down, it accepted each token from
// one holder only, and each accepted write's holder was seen granted that
// token (grants as Grants returns them). It returns how many writes were
// accepted and refused.
func Fence(writes []FenceWrite, grants []Grant) (accepted, refused int, out []Violation) {
	type grantKey struct {
		name, owner string
		token       int64
	}
	granted := map[grantKey]bool{}
	for _, g := range grants {
		granted[grantKey{g.Name, g.Owner, g.Token}] = true
	}
	highest := map[string]int64{}
	holders := map[string]map[int64]string{}
	for _, w := range writes {
		if !w.Accepted {
			refused++
			continue
		}
		accepted++
		if w.Token < highest[w.Name] {
			out = append(out, violation(KindTokenOrder, "fenced resource %q accepted token %d after %d", w.Name, w.Token, highest[w.Name]))
		}
		highest[w.Name] = max(highest[w.Name], w.Token)
		if holders[w.Name] == nil {
			holders[w.Name] = map[int64]string{}
		}
		if h, ok := holders[w.Name][w.Token]; ok && h != w.Holder {
			out = append(out, violation(KindDuplicateToken, "fenced resource %q accepted token %d from two holders, %s and %s", w.Name, w.Token, h, w.Holder))
		}
		holders[w.Name][w.Token] = w.Holder
		if !granted[grantKey{w.Name, w.Holder, w.Token}] {
			out = append(out, violation(KindFence, "fenced resource %q accepted token %d from %s, which was never seen granted it", w.Name, w.Token, w.Holder))
		}
	}
	return accepted, refused, out
}
