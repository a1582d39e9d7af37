// Package recipehooks is how statekit's simulator reaches inside the recipe
// packages (ratelimit, cache): planted bugs, the lease owner and the waits of
// a cache fill, and what a call decided. It travels in the call's context,
// like internal/hooks.WithNow for the engine; it is internal, so no
// application can set any of it, and the recipes' documentation shows none
// of it. Without it in the context every recipe behaves as documented.
package recipehooks

import (
	"context"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

// Hooks is what one call of a recipe is told and tells. The zero Hooks
// changes nothing.
type Hooks struct {
	// Bugs are the planted recipe bugs (bugs.LimiterTwoSteps,
	// bugs.CacheWritesAfterLost).
	Bugs bugs.Set
	// Decided, when not nil, is told the engine time (unix nanoseconds) a
	// limiter decided by: the db.Now() that placed the request in its
	// window.
	Decided func(nowNanos int64)
	// Owner, when not empty, is the owner a cache fill asks its lease for,
	// instead of one made from the process id and a random part.
	Owner string
	// Granted, when not nil, is told the fencing token of the lease a cache
	// fill was granted, before it runs fn.
	Granted func(token int64)
	// Sleep, when not nil, is how a cache caller waiting for another's
	// fill pauses: it must return ctx's error if ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
}

type key struct{}

// With returns ctx carrying h.
func With(ctx context.Context, h *Hooks) context.Context { return context.WithValue(ctx, key{}, h) }

// From returns the hooks ctx carries, or nil.
func From(ctx context.Context) *Hooks {
	h, _ := ctx.Value(key{}).(*Hooks)
	return h
}

// Has reports whether ctx carries bug b.
func Has(ctx context.Context, b bugs.Bug) bool {
	h := From(ctx)
	return h != nil && h.Bugs.Has(b)
}
