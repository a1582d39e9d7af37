package redisstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/state"
)

// Listing a cluster while it reshards. A listing SCANs every master at
// once; a key whose slot moves meanwhile can leave one master before its
// SCAN gets there and reach the other after that one's SCAN passed, and
// neither lists it. A key moves only while its slot is migrating: from the
// master that owns the slot to one IMPORTING it (MIGRATE, which the
// importing master accepts only then), and never back while that lasts.
// So the listing asks every master what it says of its own slots (CLUSTER
// NODES: which slots it owns, migrates and imports) before the SCANs and
// after them. A slot that no master marked as migrating or importing at
// either moment, and whose owners are the same at both, kept its keys
// where they were, and its SCANs listed them, unless it moved away and
// came back in between: then keys came to a master by MIGRATE (its count
// of RESTORE-ASKING commands, INFO commandstats, rose) that neither gained
// a slot nor imported one at either moment, or a master's config epoch
// rose without a slot gained, and the listing SCANs again (movedBack).
// Each other slot is listed again on its own (CLUSTER GETKEYSINSLOT):
// first on the masters that own it, then on the masters importing it, so
// a key that moves between the two reads is found at its destination.
// That read holds when the slot's state did not change while it ran,
// which the masters are asked again to check; a slot whose state changed
// is read again, for up to the store's migrationWait. A master that
// refuses CLUSTER NODES (an ACL) leaves the listing to its SCANs alone,
// as before these checks.

// clusterView is what the masters of a cluster say of their own slots at
// one moment, each of itself (the "myself" line of its CLUSTER NODES).
type clusterView struct {
	masters []string            // every master asked, sorted
	owners  [slotCount]string   // the masters that claim each slot, sorted, joined by commas
	marks   map[int]string      // a slot migrating or importing anywhere: what each master says of it, sorted
	into    map[int][]string    // a slot migrating or importing: the masters its keys may move to
	ids     map[string]string   // node id: address
	lines   map[string][]string // a master's address: its own CLUSTER NODES line's fields
	epochs  map[string]string   // a master's address: its config epoch
	arrived map[string]string   // a master's address: how many keys MIGRATE brought it (RESTORE-ASKING calls); "?" if unknown
	clients map[string]*redis.Client
	// blind: a master refused CLUSTER NODES (an ACL, a renamed
	// command), so the view says nothing of the slots.
	blind bool
}

// view asks every master of the cluster for its own slots: the masters
// the slot map names, and every other master one of them knows to own a
// slot or to take part in a migration.
func (s *store) view(ctx context.Context) (*clusterView, error) {
	v := &clusterView{marks: map[int]string{}, into: map[int][]string{}, ids: map[string]string{},
		lines: map[string][]string{}, epochs: map[string]string{}, arrived: map[string]string{},
		clients: map[string]*redis.Client{}}
	var mu sync.Mutex
	replies := map[string]string{} // address: CLUSTER NODES
	ask := func(ctx context.Context, c *redis.Client) error {
		var nodes *redis.StringCmd
		var stats *redis.StringCmd
		// Each command's error is read below.
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			nodes = p.ClusterNodes(ctx)
			stats = p.Info(ctx, "commandstats")
			return nil
		})
		addr := c.Options().Addr
		refused := func(err error) bool {
			var rerr redis.Error
			return errors.As(err, &rerr) && !isNetError(err)
		}
		if err := nodes.Err(); err != nil && !refused(err) {
			return on(addr, err)
		}
		arrived := "?" // INFO refused: a migration's arrivals are not seen
		if err := stats.Err(); err == nil {
			arrived = restoreCalls(stats.Val())
		} else if !refused(err) {
			return on(addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if nodes.Err() != nil {
			v.blind = true
		} else {
			replies[addr] = nodes.Val()
		}
		v.arrived[addr] = arrived
		v.clients[addr] = c
		return nil
	}
	if err := s.cluster.ForEachMaster(ctx, ask); err != nil {
		return nil, s.fail(ctx, err, reads)
	}
	for {
		// Every node any master lists; a master not asked yet that
		// owns a slot, or is named by a migration, is asked too.
		var more []string
		for addr, out := range replies {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(line)
				if len(f) < 8 {
					continue
				}
				if strings.Contains(f[2], "myself") {
					v.ids[f[0]] = addr
					v.lines[addr] = f
				} else if _, ok := v.ids[f[0]]; !ok {
					v.ids[f[0]] = nodeAddr(f[1])
				}
			}
		}
		for _, out := range replies {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(line)
				if len(f) < 8 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "noaddr") ||
					strings.Contains(f[2], "handshake") || strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?") {
					continue
				}
				addr := v.ids[f[0]]
				if _, asked := replies[addr]; asked || addr == "" || slices.Contains(more, addr) {
					continue
				}
				if len(f) > 8 || s.named(replies, f[0]) {
					more = append(more, addr)
				}
			}
		}
		if len(more) == 0 {
			break
		}
		for _, addr := range more {
			c := s.nodeClient(ctx, addr)
			if c == nil {
				return nil, state.ErrClosed
			}
			if err := ask(ctx, c); err != nil {
				return nil, s.fail(ctx, err, reads)
			}
		}
	}
	for addr := range v.clients {
		v.masters = append(v.masters, addr)
	}
	slices.Sort(v.masters)
	marks := map[int][]string{}
	for _, addr := range v.masters {
		f := v.lines[addr]
		if f == nil {
			continue // a reply without a "myself" line: nothing of its own
		}
		v.epochs[addr] = f[6]
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				sl, peer, importing, ok := parseMark(r)
				if !ok {
					continue
				}
				to := v.ids[peer]
				if importing {
					marks[sl] = append(marks[sl], addr+"<"+to)
					to = addr
				} else {
					marks[sl] = append(marks[sl], addr+">"+to)
				}
				if to != "" && !slices.Contains(v.into[sl], to) {
					v.into[sl] = append(v.into[sl], to)
				}
				continue
			}
			lo, hi, ok := parseRange(r)
			if !ok {
				continue
			}
			for sl := lo; sl <= hi; sl++ {
				if v.owners[sl] == "" {
					v.owners[sl] = addr
				} else {
					v.owners[sl] += "," + addr // sorted: v.masters is
				}
			}
		}
	}
	for sl, m := range marks {
		slices.Sort(m)
		v.marks[sl] = strings.Join(m, " ")
	}
	return v, nil
}

// named reports whether a master that replied names node id in one of its
// own migration marks.
func (s *store) named(replies map[string]string, id string) bool {
	for _, out := range replies {
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "myself") && (strings.Contains(line, "->-"+id+"]") || strings.Contains(line, "-<-"+id+"]")) {
				return true
			}
		}
	}
	return false
}

// nodeAddr returns host:port of a CLUSTER NODES address field,
// "host:port@cport" or "host:port@cport,hostname".
func nodeAddr(f string) string {
	if i := strings.IndexByte(f, '@'); i >= 0 {
		f = f[:i]
	}
	return f
}

// parseRange reads a slot range of CLUSTER NODES, "5461-10922" or "7".
func parseRange(r string) (lo, hi int, ok bool) {
	a, b, isRange := strings.Cut(r, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := lo, error(nil)
	if isRange {
		hi, err2 = strconv.Atoi(b)
	}
	if err1 != nil || err2 != nil || lo < 0 || hi >= slotCount || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

// parseMark reads a migration mark of CLUSTER NODES: "[93->-id]", slot 93
// migrating to node id, or "[93-<-id]", importing from it.
func parseMark(r string) (sl int, peer string, importing, ok bool) {
	r = strings.TrimSuffix(strings.TrimPrefix(r, "["), "]")
	a, b, mig := strings.Cut(r, "->-")
	if !mig {
		if a, b, ok = strings.Cut(r, "-<-"); !ok {
			return 0, "", false, false
		}
		importing = true
	}
	sl, err := strconv.Atoi(a)
	if err != nil || sl < 0 || sl >= slotCount {
		return 0, "", false, false
	}
	return sl, b, importing, true
}

// unsettled returns the slots of v to list again after a listing that ran
// between the views before and v: migrating or importing in either, or
// owned by other masters in one than in the other.
func (before *clusterView) unsettled(v *clusterView) []int {
	var out []int
	for sl := range slotCount {
		if before.owners[sl] != v.owners[sl] || before.marks[sl] != "" || v.marks[sl] != "" {
			out = append(out, sl)
		}
	}
	return out
}

// restoreCalls returns, from INFO commandstats, how many RESTORE-ASKING
// commands the server ran: the keys MIGRATE brought it, one each.
func restoreCalls(info string) string {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_restore-asking:calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			return n
		}
	}
	return "0"
}

// movedBack reports whether a slot may have moved away from a master and
// back again between the views before and v, which their slots' states
// do not show: keys came to a master by MIGRATE (its RESTORE-ASKING count
// rose) while it gained no slot and imported none at either view, or a
// master's config epoch rose while it gained no slot (a master raises its
// epoch as it takes a slot at the end of a migration, unless it believes
// its epoch the cluster's highest already).
func (before *clusterView) movedBack(v *clusterView) bool {
	gained := map[string]bool{}
	for sl := range slotCount {
		if before.owners[sl] == v.owners[sl] {
			continue
		}
		was := strings.Split(before.owners[sl], ",")
		for _, addr := range strings.Split(v.owners[sl], ",") {
			if !slices.Contains(was, addr) {
				gained[addr] = true
			}
		}
	}
	importing := map[string]bool{}
	for _, view := range []*clusterView{before, v} {
		for sl := range view.marks {
			for _, addr := range view.into[sl] {
				importing[addr] = true
			}
		}
	}
	for addr, n := range v.arrived {
		if was, ok := before.arrived[addr]; ok && was != n && !gained[addr] && !importing[addr] {
			return true
		}
	}
	for addr, e := range v.epochs {
		if was, ok := before.epochs[addr]; ok && was != e && !gained[addr] {
			return true
		}
	}
	return false
}

// changed returns the slots of sls whose state differs between the views
// before and v: their owners or their migration marks.
func (before *clusterView) changed(v *clusterView, sls []int) []int {
	var out []int
	for _, sl := range sls {
		if before.owners[sl] != v.owners[sl] || before.marks[sl] != v.marks[sl] {
			out = append(out, sl)
		}
	}
	return out
}

// listCluster returns every Redis key that starts with prefix (match is
// its SCAN pattern) on every master of the cluster, without repeats,
// sorted by bytes, whatever slots moved while it ran (see above).
func (s *store) listCluster(ctx context.Context, prefix, match string) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]bool{}
	add := func(keys []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				seen[k] = true
			}
		}
	}
	scan := func(ctx context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		if s.scanning != nil {
			defer s.scanning(addr)()
		}
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
			if err != nil {
				return on(addr, err)
			}
			add(keys)
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var deadline time.Time // the end of the wait for slots to settle
	gaveUp := func(what string) error {
		return fmt.Errorf("%w: %s kept moving between masters for %v while the listing read them: their keys could not all be listed", state.ErrUnavailable, what, s.migrationWait)
	}
	var v *clusterView
	var redo []int
	for {
		before, err := s.view(ctx)
		if err != nil {
			return nil, err
		}
		if err := eachMaster(ctx, before, scan); err != nil {
			return nil, s.fail(ctx, err, reads)
		}
		if v, err = s.view(ctx); err != nil {
			return nil, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.migrationWait)
		}
		if before.blind || v.blind {
			break // no slot can be checked: the SCANs alone (see doc.go)
		}
		if !before.movedBack(v) {
			redo = before.unsettled(v)
			break
		}
		// A slot may have gone from a master and come back while
		// the SCANs ran, which no slot's state shows: SCAN again.
		if time.Now().After(deadline) {
			return nil, gaveUp("cluster slots (one moved away from a master and came back)")
		}
	}
	for len(redo) > 0 {
		if time.Now().After(deadline) {
			return nil, gaveUp("cluster slots " + slotList(redo))
		}
		for _, sl := range redo {
			if err := s.slotKeys(ctx, v, sl, add); err != nil {
				return nil, err
			}
		}
		after, err := s.view(ctx)
		if err != nil {
			return nil, err
		}
		if !v.movedBack(after) {
			redo = v.changed(after, redo)
		}
		v = after
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// slotList names slots for an error, at most 8 of them.
func slotList(sls []int) string {
	if len(sls) > 8 {
		return fmt.Sprintf("%v and %d more", sls[:8], len(sls)-8)
	}
	return fmt.Sprint(sls)
}

// eachMaster runs fn on each master of v at once, and returns the first
// error.
func eachMaster(ctx context.Context, v *clusterView, fn func(context.Context, *redis.Client) error) error {
	errs := make([]error, len(v.masters))
	var wg sync.WaitGroup
	for i, addr := range v.masters {
		c := v.clients[addr]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(ctx, c)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// slotKeys lists slot sl's keys (CLUSTER GETKEYSINSLOT) as v says where
// they are: first on the masters that own it, then on those importing it,
// where a key that moves between the two reads is found; add takes them.
func (s *store) slotKeys(ctx context.Context, v *clusterView, sl int, add func([]string)) error {
	var from []string
	if v.owners[sl] != "" {
		from = strings.Split(v.owners[sl], ",")
	}
	for _, to := range v.into[sl] {
		if !slices.Contains(from, to) {
			from = append(from, to)
		}
	}
	for _, addr := range from {
		c := v.clients[addr]
		if c == nil {
			if c = s.nodeClient(ctx, addr); c == nil {
				return state.ErrClosed
			}
		}
		if s.scanning != nil {
			defer s.scanning(addr)()
		}
		n, err := c.ClusterCountKeysInSlot(ctx, sl).Result()
		for err == nil {
			var keys []string
			keys, err = c.ClusterGetKeysInSlot(ctx, sl, int(n)+64).Result()
			if err == nil && len(keys) < int(n)+64 {
				add(keys)
				break
			}
			n = 2 * (n + 64) // keys came meanwhile: ask for more
		}
		if err != nil {
			return s.fail(ctx, on(addr, err), reads)
		}
	}
	return nil
}
