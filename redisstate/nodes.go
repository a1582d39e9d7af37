package redisstate

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// nodes makes the clients of a cluster's masters: go-redis's, for the
// masters its slot map names, and the store's own, from the same options,
// for a master the map does not name yet (one just added to the cluster,
// importing its first slot, which CLUSTER SLOTS does not list).
type nodes struct {
	mu    sync.Mutex
	tmpl  *redis.Options           // the options of the first master's client go-redis made
	extra map[string]*redis.Client // by address: the store's own clients
	done  bool                     // closed: no more clients

	// durableAt, by address of a master outside the map, is the store's
	// conns+1 as it was when that master last passed the durability
	// check (askdurable.go).
	durableAt map[string]uint64
}

// newClient is the cluster's ClusterOptions.NewClient: go-redis's client
// of the master opt names, with nodeHook, and its options kept as the
// template of the store's own clients.
func (n *nodes) newClient(opt *redis.Options) *redis.Client {
	n.mu.Lock()
	if n.tmpl == nil {
		o := *opt
		n.tmpl = &o
	}
	n.mu.Unlock()
	return hooked(opt)
}

// hooked returns a client with opt and nodeHook: its errors name its
// master (replied.go).
func hooked(opt *redis.Options) *redis.Client {
	c := redis.NewClient(opt)
	c.AddHook(nodeHook{addr: opt.Addr})
	return c
}

// client returns the store's own client of the master at addr, made once
// from the template, or nil before go-redis made any (the store has
// reached no master yet) and once the store is closed.
func (n *nodes) client(addr string) *redis.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.extra[addr]; c != nil {
		return c
	}
	if n.tmpl == nil || n.done {
		return nil
	}
	o := *n.tmpl
	o.Addr, o.NodeAddress = addr, addr
	c := hooked(&o)
	if n.extra == nil {
		n.extra = map[string]*redis.Client{}
	}
	n.extra[addr] = c
	return c
}

// close closes the store's own clients.
func (n *nodes) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.extra {
		_ = c.Close()
	}
	n.extra, n.done = nil, true
}

// nodeClient returns a client of the cluster master at addr: go-redis's
// when its slot map names that master, else the store's own.
func (s *store) nodeClient(ctx context.Context, addr string) *redis.Client {
	if c := s.masterAt(ctx, addr); c != nil {
		return c
	}
	return s.nodes.client(addr)
}
