package redisstate

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A master outside the slot map. While a slot migrates to a master just
// added to the cluster, which owns no slot yet, CLUSTER SLOTS does not list
// that master, so the store's map (go-redis's) has no client of it: a verb
// its old master answers with ASK goes to the store's own client of it
// (nodes.go). checkDurable asks the masters of the map only, so a write
// that must find its server durable (a lease grant, every write of a
// SyncFull store) checks that master on its own before it is sent there
// (checkOutside), and again after it, with the map's masters, when the
// store opened a connection since (recheckDurable): a grant is never
// answered from a master whose durability was not verified.

// durableWriteKey is the context key of a write's *durableWrite.
type durableWriteKey struct{}

// durableWrite is what a write verb tells onOwner, and learns from it,
// through its context.
type durableWrite struct {
	lease   bool          // a lease grant (needsDurable)
	outside *redis.Client // the master outside the map the write was sent to, or nil
}

// withDurableWrite returns ctx carrying a *durableWrite for a write (lease:
// a grant), and that *durableWrite.
func withDurableWrite(ctx context.Context, lease bool) (context.Context, *durableWrite) {
	w := &durableWrite{lease: lease}
	return context.WithValue(ctx, durableWriteKey{}, w), w
}

// askTarget returns the client of the master at addr, which an ASK named:
// go-redis's when the map names that master, else the store's own, or nil
// when there is none (the store is closed). Before a write that needs a
// durable server is sent to a master outside the map, that master is
// checked (checkOutside), and noted for the check after the write; its
// error (classified) means nothing was sent there.
func (s *store) askTarget(ctx context.Context, addr string) (*redis.Client, error) {
	if c := s.masterAt(ctx, addr); c != nil {
		return c, nil
	}
	c := s.nodes.client(addr)
	if c == nil {
		return nil, nil
	}
	if w, ok := ctx.Value(durableWriteKey{}).(*durableWrite); ok {
		if err := s.checkOutside(ctx, c, w.lease); err != nil {
			return nil, err
		}
		w.outside = c
	}
	return c, nil
}

// checkOutside is checkDurable for c, the store's own client of a master
// outside the map: nil when the write needs no check, when c's master
// keeps every write, or when it passed since the store last opened a
// connection (a restart is reached over new connections only, as for
// checkDurable); else an error wrapping ErrNotDurable, or the classified
// error of a master that could not be asked.
func (s *store) checkOutside(ctx context.Context, c *redis.Client, lease bool) error {
	gen := s.conns.Load()
	addr := c.Options().Addr
	if !s.needsDurable(lease) || s.nodes.passedAt(addr) == gen+1 {
		return nil
	}
	problems, err := s.durableProblems(ctx, c, s.durabilityOf(lease))
	if err != nil {
		return s.fail(ctx, err, reads)
	}
	if len(problems) > 0 {
		return problems[0]
	}
	s.nodes.passed(addr, gen+1)
	return nil
}

// passedAt returns the store's conns+1 as it was when the master at addr
// last passed checkOutside, 0 for never.
func (n *nodes) passedAt(addr string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.durableAt[addr]
}

// passed records that the master at addr passed checkOutside when the
// store's conns was at-1.
func (n *nodes) passed(addr string, at uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.durableAt == nil {
		n.durableAt = map[string]uint64{}
	}
	n.durableAt[addr] = at
}
