package redisstate

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moveSlot moves slot sl's keys rkeys from the master from to the master
// to, as redis-cli --cluster reshard does (IMPORTING, MIGRATING, then
// MIGRATE key by key), and with end gives the slot to to on every master;
// without it, the slot stays migrating. It may run on any goroutine.
func moveSlot(c *redistest.Cluster, sl int, from, to string, rkeys []string, end bool) error {
	pw := c.Servers[0].Password()
	cmd := func(addr string, args ...string) (string, error) {
		out, err := redistest.CommandText(addr, pw, args...)
		if err != nil {
			return "", fmt.Errorf("%s %v: %w", addr, args, err)
		}
		return out, nil
	}
	fromID, err := cmd(from, "CLUSTER", "MYID")
	if err != nil {
		return err
	}
	toID, err := cmd(to, "CLUSTER", "MYID")
	if err != nil {
		return err
	}
	n := strconv.Itoa(sl)
	if _, err := cmd(to, "CLUSTER", "SETSLOT", n, "IMPORTING", fromID); err != nil {
		return err
	}
	if _, err := cmd(from, "CLUSTER", "SETSLOT", n, "MIGRATING", toID); err != nil {
		return err
	}
	host, port, _ := net.SplitHostPort(to)
	for _, k := range rkeys {
		if _, err := cmd(from, "MIGRATE", host, port, k, "0", "5000"); err != nil {
			return err
		}
	}
	if !end {
		return nil
	}
	if _, err := cmd(to, "CLUSTER", "SETSLOT", n, "NODE", toID); err != nil {
		return err
	}
	for _, a := range c.Addrs() {
		if a != to {
			if _, err := cmd(a, "CLUSTER", "SETSLOT", n, "NODE", toID); err != nil {
				return err
			}
		}
	}
	return nil
}

// listingKeys fills a store with keys and leases: n keys and a lease in
// the slot of the hash tag {s}, and n keys elsewhere. It returns the keys,
// sorted, and the Redis keys of the slot of {s}.
func listingKeys(t *testing.T, tc *testCluster, n int) (keys, inSlot []string) {
	for i := range n {
		keys = append(keys, fmt.Sprintf("{s}k%02d", i), fmt.Sprintf("o%02d", i))
	}
	for _, k := range keys {
		require.NoError(t, tc.s.Set(tc.ctx, k, state.IntValue(1), 0))
		if strings.HasPrefix(k, "{s}") {
			inSlot = append(inSlot, tc.s.keyOf(k))
		}
	}
	_, err := tc.s.Lease(tc.ctx, "{s}job", "me", 600000)
	require.NoError(t, err)
	inSlot = append(inSlot, tc.s.leaseOf("{s}job"))
	slices.Sort(keys)
	return keys, inSlot
}

// TestClusterListingsSeeKeysWhoseSlotMoves: a slot's keys and lease move
// from one master to another between the two masters' SCANs of a listing:
// the new master's SCAN is over before they arrive, the old master's
// begins after they left. Scan, Stats and Leases still list every key and
// the lease, whether the move ended while the listing ran or the slot is
// still migrating, half its keys moved, when the SCANs end. Without the
// slots listed again (listCluster's redo left empty), each listing missed
// the keys that moved, as a listing did before.
func TestClusterListingsSeeKeysWhoseSlotMoves(t *testing.T) {
	tc := newTestCluster(t, "s:")
	s, ctx := tc.s, tc.ctx
	keys, inSlot := listingKeys(t, tc, 20)
	sl := slot(inSlot[0])
	from := tc.owner(inSlot[0])
	to := tc.other(from)

	for _, half := range []bool{false, true} {
		what := "the move ended"
		move := inSlot
		if half {
			what, move = "the slot still migrating", inSlot[len(inSlot)/2:] // the lease among them
		}
		// during runs a listing while the slot moves between the SCANs
		// of to and of from (the third master's is left alone), then
		// moves the slot back to from.
		during := func(listing func() error) {
			t.Helper()
			moved := make(chan struct{})
			var once sync.Once
			var moveErr error
			s.scanning = func(addr string) func() {
				switch addr {
				case from:
					<-moved
				case to:
					return func() {
						once.Do(func() {
							moveErr = moveSlot(tc.c, sl, from, to, move, !half)
							close(moved)
						})
					}
				}
				return func() {}
			}
			err := listing()
			s.scanning = nil
			require.NoError(t, err, what)
			require.NoError(t, moveErr, what)
			if half {
				require.NoError(t, moveSlot(tc.c, sl, from, to, inSlot, true), "ending the move")
			}
			require.NoError(t, moveSlot(tc.c, sl, to, from, inSlot, true), "moving back")
		}

		var scanned []string
		during(func() error {
			return s.Scan(ctx, "", false, func(k state.KeyInfo) error {
				scanned = append(scanned, k.Key)
				return nil
			})
		})
		assert.Equal(t, keys, scanned, "%s: Scan lists every key", what)
		var st state.Stats
		during(func() (err error) { st, err = s.Stats(ctx); return err })
		assert.EqualValues(t, len(keys), st.Keys, "%s: Stats counts every key", what)
		leases := 0
		during(func() error {
			return s.Leases(ctx, true, func(state.LeaseInfo) error { leases++; return nil })
		})
		assert.Equal(t, 1, leases, "%s: Leases lists the lease", what)
	}
}

// TestClusterListingsSeeKeysWhoseSlotMovedAwayAndBack: a slot's keys move
// from their master to another once the other's SCAN is over, and back
// once their master's SCAN is over: neither SCAN met them, and the slot's
// owner and state are the same after the SCANs as before. The keys MIGRATE
// brought to the master that gained no slot (its RESTORE-ASKING count),
// and the config epoch one of the two raised as it took the slot, show
// the listing that something moved, and it SCANs again: Scan lists every
// key. (Without that check, movedBack, it missed the slot's keys.)
func TestClusterListingsSeeKeysWhoseSlotMovedAwayAndBack(t *testing.T) {
	tc := newTestCluster(t, "a:")
	s, ctx := tc.s, tc.ctx
	keys, inSlot := listingKeys(t, tc, 20)
	sl := slot(inSlot[0])
	from := tc.owner(inSlot[0])
	to := tc.other(from)

	for round := range 3 { // the epoch raised by the master taking the slot, or by the one it comes back to
		there := make(chan struct{})
		var away, back sync.Once
		var moveErr error
		s.scanning = func(addr string) func() {
			switch addr {
			case from:
				<-there
				return func() { back.Do(func() { moveErr = errors.Join(moveErr, moveSlot(tc.c, sl, to, from, inSlot, true)) }) }
			case to:
				return func() {
					away.Do(func() {
						moveErr = moveSlot(tc.c, sl, from, to, inSlot, true)
						close(there)
					})
				}
			}
			return func() {}
		}
		var scanned []string
		err := s.Scan(ctx, "", false, func(k state.KeyInfo) error {
			scanned = append(scanned, k.Key)
			return nil
		})
		s.scanning = nil
		require.NoError(t, moveErr)
		require.NoError(t, err)
		assert.Equal(t, keys, scanned, "round %d: Scan lists every key", round)
		assert.Equal(t, from, tc.owner(inSlot[0]), "the slot came back")
	}
}

// TestClusterListingGivesUpOnASlotThatNeverSettles: a slot whose state
// changes during every read of its keys is listed again and again, until
// the store's migrationWait has passed: then the listing fails with
// ErrUnavailable naming the slot, rather than return a listing that may
// miss its keys or run on for ever.
func TestClusterListingGivesUpOnASlotThatNeverSettles(t *testing.T) {
	tc := newTestCluster(t, "g:")
	s, ctx := tc.s, tc.ctx
	_, inSlot := listingKeys(t, tc, 3)
	sl := slot(inSlot[0])
	from := tc.owner(inSlot[0])
	to := tc.other(from)
	require.NoError(t, moveSlot(tc.c, sl, from, to, nil, false))
	toID := tc.cmd(to, "CLUSTER", "MYID")
	const bound = 300 * time.Millisecond
	s.migrationWait = bound
	var toggles int
	var toggleErr error
	s.scanning = func(addr string) func() {
		// MIGRATING, then not, then again: the slot's state on its
		// master changes with each read there.
		if addr != from {
			return func() {}
		}
		args := []string{"CLUSTER", "SETSLOT", strconv.Itoa(sl), "STABLE"}
		if toggles%2 == 1 {
			args = []string{"CLUSTER", "SETSLOT", strconv.Itoa(sl), "MIGRATING", toID}
		}
		toggles++
		if _, err := redistest.CommandText(from, "", args...); err != nil && toggleErr == nil {
			toggleErr = err
		}
		return func() {}
	}
	start := time.Now()
	err := s.Scan(ctx, "", false, func(state.KeyInfo) error { return nil })
	took := time.Since(start)
	s.scanning = nil
	require.NoError(t, toggleErr)
	require.ErrorIs(t, err, state.ErrUnavailable)
	assert.Contains(t, err.Error(), fmt.Sprintf("cluster slots [%d] kept moving between masters", sl))
	assert.GreaterOrEqual(t, took, bound)
	assert.Greater(t, toggles, 3, "the slot was read again")
}

// TestClusterListingsDuringAResharding: while another goroutine moves a
// slot between two masters, key by key, as redis-cli --cluster reshard
// does, every Scan lists every key. Each Scan overlaps one move of the
// slot, begun as the Scan begins to SCAN, and ended before the next Scan:
// a listing does not see a slot moved away and back again while it runs.
func TestClusterListingsDuringAResharding(t *testing.T) {
	tc := newTestCluster(t, "r:")
	s, ctx := tc.s, tc.ctx
	s.migrationWait = time.Minute // a cap for a loaded machine
	keys, inSlot := listingKeys(t, tc, 40)
	sl := slot(inSlot[0])
	from := tc.owner(inSlot[0])
	to := tc.other(from)

	for i := range 20 {
		var once sync.Once
		moved := make(chan error, 1)
		s.scanning = func(string) func() {
			once.Do(func() { go func() { moved <- moveSlot(tc.c, sl, from, to, inSlot, true) }() })
			return func() {}
		}
		var scanned []string
		err := s.Scan(ctx, "", false, func(k state.KeyInfo) error {
			scanned = append(scanned, k.Key)
			return nil
		})
		s.scanning = nil
		require.NoError(t, <-moved)
		require.NoError(t, err, "scan %d", i)
		require.Equal(t, keys, scanned, "scan %d lists every key", i)
		from, to = to, from
	}
}

// TestClusterListingsSeeANewMaster: a master joins the cluster and a slot
// moves to it. The store's slot map, loaded before, does not name it:
// while the slot migrates (half its keys there) and once it owns the slot,
// Scan lists every key and Stats counts them, the new master's too.
// Before, a listing SCANned only the masters of the store's map, and
// missed them.
func TestClusterListingsSeeANewMaster(t *testing.T) {
	tc := newTestCluster(t, "j:")
	s, ctx := tc.s, tc.ctx
	keys, inSlot := listingKeys(t, tc, 20)
	sl := slot(inSlot[0])
	from := tc.owner(inSlot[0])

	n := tc.addMaster()
	scan := func(what string) {
		t.Helper()
		var scanned []string
		require.NoError(t, s.Scan(ctx, "", false, func(k state.KeyInfo) error {
			scanned = append(scanned, k.Key)
			return nil
		}), what)
		assert.Equal(t, keys, scanned, "%s: Scan lists every key", what)
		st, err := s.Stats(ctx)
		require.NoError(t, err, what)
		assert.EqualValues(t, len(keys), st.Keys, "%s: Stats counts every key", what)
		assert.EqualValues(t, 1, st.LeaseNames, "%s: Stats counts the lease", what)
	}
	half := inSlot[len(inSlot)/2:]
	require.NoError(t, moveSlot(tc.c, sl, from, n.Addr(), half, false))
	scan("the slot migrating to the new master")
	require.NoError(t, moveSlot(tc.c, sl, from, n.Addr(), inSlot, false))
	id := tc.cmd(n.Addr(), "CLUSTER", "MYID")
	for _, a := range append([]string{n.Addr()}, tc.c.Addrs()...) {
		tc.cmd(a, "CLUSTER", "SETSLOT", strconv.Itoa(sl), "NODE", id)
	}
	scan("the slot on the new master")
	v, err := s.Get(ctx, keys[len(keys)-1])
	require.NoError(t, err, "Get on the new master")
	assert.Equal(t, "1", v.String())
	assert.Equal(t, strconv.Itoa(len(inSlot)), tc.cmd(n.Addr(), "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(sl)))
}

// TestClusterListingsUnderAnACL: a user whose ACL refuses INFO still lists
// every key of a slot that moves during the listing (the slots' states
// come from CLUSTER NODES); one refused CLUSTER NODES too lists with SCAN
// alone, as before the slots were checked, rather than fail.
func TestClusterListingsUnderAnACL(t *testing.T) {
	tc := newTestCluster(t, "l:")
	keys, inSlot := listingKeys(t, tc, 10)
	sl := slot(inSlot[0])
	from := tc.owner(inSlot[0])
	to := tc.other(from)
	open := func(user string, rules ...string) *store {
		t.Helper()
		for _, a := range tc.c.Addrs() {
			tc.cmd(a, append([]string{"ACL", "SETUSER", user, "on", ">pw-" + user, "~*", "&*", "+@all"}, rules...)...)
		}
		u := strings.Replace(tc.c.URL("l:"), "redis+cluster://", "redis+cluster://"+user+":pw-"+user+"@", 1)
		s, err := open(u, backendOptions())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	scan := func(s *store, what string) {
		t.Helper()
		var scanned []string
		require.NoError(t, s.Scan(tc.ctx, "", false, func(k state.KeyInfo) error {
			scanned = append(scanned, k.Key)
			return nil
		}), what)
		assert.Equal(t, keys, scanned, "%s: Scan lists every key", what)
	}

	s := open("noinfo", "-info")
	v, err := s.view(tc.ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{tc.c.Addrs()[0]: "?", tc.c.Addrs()[1]: "?", tc.c.Addrs()[2]: "?"}, v.arrived, "INFO refused")
	assert.False(t, v.blind)
	moved := make(chan struct{})
	var once sync.Once
	var moveErr error
	s.scanning = func(addr string) func() {
		switch addr {
		case from:
			<-moved
		case to:
			return func() {
				once.Do(func() {
					moveErr = moveSlot(tc.c, sl, from, to, inSlot[len(inSlot)/2:], false)
					close(moved)
				})
			}
		}
		return func() {}
	}
	scan(s, "without INFO, the slot moving between the SCANs")
	require.NoError(t, moveErr)
	s.scanning = nil
	require.NoError(t, moveSlot(tc.c, sl, from, to, inSlot, true))

	s = open("nonodes", "-info", "-cluster|nodes")
	v, err = s.view(tc.ctx)
	require.NoError(t, err)
	assert.True(t, v.blind, "CLUSTER NODES refused")
	scan(s, "without CLUSTER NODES")
}
