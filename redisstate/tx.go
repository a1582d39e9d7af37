package redisstate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state"
)

// Update's retry budget: a callback whose watched keys kept changing is
// run at most txAttempts times, with a jittered pause between attempts.
const (
	txAttempts   = 32
	txBackoffMin = time.Millisecond
	txBackoffMax = 50 * time.Millisecond
)

// errRetry marks an attempt that must start over (a cluster slot moved).
var errRetry = errors.New("statekit: retry the transaction")

// redirected is errRetry for an attempt a cluster redirect (MOVED, ASK)
// stopped before anything was applied: cause is the redirect, classified
// (ErrUnavailable), ask whether it was ASK (the slot is migrating), slot
// the transaction's slot. Update waits for the slot to settle and runs the
// transaction again, up to the store's migrationWait (waitForSlot).
type redirected struct {
	cause error
	ask   bool
	slot  int
}

func (r *redirected) Error() string {
	return "statekit: the transaction met a cluster redirect: " + r.cause.Error()
}
func (r *redirected) Unwrap() error { return errRetry }

// errRetryNow is errRetry for an attempt whose answers no single server
// time explains (tx.saw): no other writer is in the way, so the next
// attempt, which reads its keys first (txprefetch.go), runs at once.
var errRetryNow = fmt.Errorf("%w: its answers hold at no single server time", errRetry)

// Update runs fn optimistically: reads WATCH their keys on a connection of
// the transaction's own, writes wait in an overlay and are sent in one
// MULTI/EXEC once fn returns nil. When a watched key changed meanwhile,
// EXEC does nothing and fn runs again, up to txAttempts times; so does an
// attempt whose answers no single server time explains (see tx.now).
//
// In a cluster, an attempt that met a redirect (its slot migrating, ASK,
// or owned by another master than the map says, MOVED) applied nothing,
// and does not count among the txAttempts: Update waits for the slot to
// settle and runs it again on the master that owns the slot then, for up
// to the store's migrationWait in all (waitForSlot).
//
// The server time the last attempt's answers hold at (its final now) is
// told to ctx's observer (hooks.NoteNow) once, when that attempt commits
// or fn fails, never for an attempt that is run again.
func (s *store) Update(ctx context.Context, fn func(tx any) error) error {
	var ahead []string // keys the attempts so far read, read first on the next (txprefetch.go)
	forTime := 0       // attempts started over for their time, not for another writer
	var moving slotWait
	for attempt := 1; ; {
		if s.closed.Load() {
			return state.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("statekit: %w%s", err, moving.during())
		}
		err := s.attempt(ctx, fn, &ahead)
		if !errors.Is(err, errRetry) {
			return err
		}
		var rd *redirected
		if errors.As(err, &rd) {
			if err := s.waitForSlot(ctx, &moving, rd); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, errRetryNow) {
			forTime++
		}
		if attempt == txAttempts {
			return txGaveUp(forTime)
		}
		attempt++
		if errors.Is(err, errRetryNow) {
			continue
		}
		pause := min(txBackoffMax, txBackoffMin<<min(attempt-1, 6))
		pause = pause/2 + rand.N(pause/2+1)
		if err := s.pause(ctx, pause); err != nil {
			return fmt.Errorf("statekit: %w", err)
		}
	}
}

// The pauses of an Update waiting for its cluster slot to settle: from
// slotPauseMin, doubling, to slotPauseMax, jittered. A slot moves in
// milliseconds to seconds (its keys are migrated one batch at a time),
// and each pause ends with one attempt, whose first round trip (reading
// the keys the attempt before it read, txprefetch.go) meets the redirect
// again, before the callback runs, while the slot still moves.
const (
	slotPauseMin = 5 * time.Millisecond
	slotPauseMax = 100 * time.Millisecond
)

// slotWait is an Update's wait for its slot to settle.
type slotWait struct {
	since  time.Time // the end of the first attempt a redirect stopped; zero for none yet
	pauses int
	slot   int
}

// during says, for an error of an Update that was waiting for its slot,
// what it was waiting for; "" when it was not.
func (w *slotWait) during() string {
	if w.since.IsZero() {
		return ""
	}
	return fmt.Sprintf(" (the transaction had waited %v for cluster slot %d to finish moving between masters)",
		time.Since(w.since).Round(time.Millisecond), w.slot)
}

// waitForSlot pauses an Update whose attempt a cluster redirect (rd)
// stopped, before its next attempt: the transaction runs only on the
// master that owns its slot (its connection never follows ASK, so its
// writes never go to a master the slot is still moving to, and a redirect
// means nothing of the attempt was applied), so it waits for the slot to
// settle. It returns nil to run the next attempt; the context's error
// when ctx ends first; ErrUnavailable saying the slot is still moving once
// the store's migrationWait has passed since the first redirect.
func (s *store) waitForSlot(ctx context.Context, w *slotWait, rd *redirected) error {
	if w.since.IsZero() {
		w.since = time.Now()
	}
	w.slot = rd.slot
	waited := time.Since(w.since)
	if waited >= s.migrationWait {
		what := fmt.Sprintf("cluster slot %d was still migrating (its master answered ASK)", rd.slot)
		if !rd.ask {
			what = fmt.Sprintf("cluster slot %d kept being redirected (MOVED: the masters' slot maps did not settle)", rd.slot)
		}
		return fmt.Errorf("%w: %s after the transaction waited %v for it: the slot is moving between masters, and a transaction runs only on the master that owns its slot, so it waits up to %v for a move to end; nothing was applied: %w",
			state.ErrUnavailable, what, waited.Round(time.Millisecond), s.migrationWait, rd.cause)
	}
	pause := min(slotPauseMax, slotPauseMin<<min(w.pauses, 5))
	w.pauses++
	pause = pause/2 + rand.N(pause/2+1)
	pause = min(pause, s.migrationWait-waited)
	if err := s.pause(ctx, pause); err != nil {
		return fmt.Errorf("statekit: %w%s", err, w.during())
	}
	return nil
}

// txGaveUp is Update's error after txAttempts attempts, forTime of them
// started over because their answers held at no single server time (a key
// found absent may have expired after the time the attempt runs at), the
// rest because another writer changed a key the attempt read.
func txGaveUp(forTime int) error {
	conflicts := txAttempts - forTime
	switch {
	case forTime == 0:
		return fmt.Errorf("%w: the transaction's keys kept changing under it: %d attempts conflicted with other writers", state.ErrBusy, txAttempts)
	case conflicts == 0:
		return fmt.Errorf("%w: %d attempts read keys whose answers held at no single server time (keys expiring as they were read), and started over", state.ErrBusy, txAttempts)
	}
	return fmt.Errorf("%w: of %d attempts, %d conflicted with other writers and %d read keys whose answers held at no single server time (keys expiring as they were read)", state.ErrBusy, txAttempts, conflicts, forTime)
}

// attempt runs fn once and commits what it wrote. It first reads the keys
// in *ahead, and adds to it the keys this attempt asked to read.
func (s *store) attempt(ctx context.Context, fn func(tx any) error, ahead *[]string) error {
	t := &tx{s: s, ctx: ctx, slot: -1, keys: map[string]*keyState{}, leases: map[string]*leaseState{}}
	defer t.close()
	defer func() { *ahead = t.asked }()
	if err := t.readAhead(*ahead); err != nil {
		return err
	}
	if err := fn(t); err != nil {
		if t.broken != nil {
			if errors.Is(t.broken, errRetry) {
				return t.broken
			}
			return err
		}
		// fn's error may come from reads of two states: checked as a
		// commit would be, and run again on a conflict (txcheck.go).
		if cerr := t.checkWatches(); errors.Is(cerr, errRetry) {
			return cerr
		} else if cerr != nil {
			// What fn read may not have held at one moment, so its
			// answer is not given: the check's own failure is (nothing
			// was written).
			return fmt.Errorf("%w (the callback's error, %v, is not returned: whether what it read held still is unknown)", cerr, err)
		}
		// fn's answers hold at now: the check of an aborted
		// transaction reads them at that time too.
		if now, ok := t.finalNow(); ok {
			hooks.NoteNow(ctx, now)
		}
		return err
	}
	if t.broken != nil {
		return t.broken
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("statekit: %w", err)
	}
	if err := t.commit(); err != nil {
		return err
	}
	if now, ok := t.finalNow(); ok {
		hooks.NoteNow(ctx, now)
	}
	return nil
}

// tx is the transaction Update gives its callback. It implements state's
// remoteTx interface.
//
// # Time
//
// The transaction claims one server time, now: every answer it gives is
// the file engine's answer at now, and every deadline it writes is
// counted from it. now is the TIME of its first read (or, for a first
// verb that reads no key, a TIME of its own, read then); each later read returns the
// TIME t it read at, which Redis's own expiry follows, and t >= now. A key
// found live at t, with its deadline d > t, was live at now too. A key
// found absent at t > now may have expired in (now, t], when the file
// engine would still count it live at now: so now moves forward to t,
// which is sound while no answer given so far depends on the exact now
// (pinned: a TTL counted from a deadline read, a lease granted, renewed
// or released, a LeaseHeldError's Left) and every key read live so far
// stays live at t (minLive > t). Otherwise the attempt is abandoned and
// run again (errRetry). A key that expires after it was read is left to
// EXEC: Redis fails EXEC when a watched key expired after its WATCH. The
// deadlines the transaction writes are kept relative (ttl from now) and
// resolved with the final now when MULTI/EXEC is built, so moving now
// keeps them right.
type tx struct {
	s      *store
	ctx    context.Context
	conn   *redis.Conn // taken at the first verb, from the server (or master) of its key
	addr   string      // conn's server, host:port, for errors
	slot   int         // in a cluster: the slot every key must share; -1 before the first
	first  string      // the first key or lease name, for the cross-slot error
	now    int64       // the transaction's server time, ms; 0 until known
	pinned bool        // an answer depends on the exact now: it may not move
	// minLive is the earliest deadline of a key read live from the
	// server (0: none): now may not move to it or past it.
	minLive int64
	keys    map[string]*keyState
	leases  map[string]*leaseState
	order   []string // Redis keys in the order first written
	broken  error    // a failure that keeps the transaction from committing
	execd   bool
	// granted: a lease was granted; with wait_replicas the commit
	// waits for the replicas (WAIT) before Update returns.
	granted bool
	// checked: a Lease checked the server's durability, when the store
	// had opened durableGen connections; the commit checks again if it
	// opened one since (recheckDurable).
	checked    bool
	durableGen uint64
	asked      []string // Redis keys this attempt asked to read, in order, without repeats
}

// deadline is a deadline in the transaction: an absolute server time read
// from the server, or a ttl the transaction wrote, counted from its final
// now. The zero deadline is none.
type deadline struct {
	abs int64 // ms since the epoch, server time; 0 for none
	rel int64 // ms after the transaction's now; 0 unless written here
}

// after returns the deadline of ttl ms from the transaction's now, or none
// for ttl <= 0.
func after(ttl int64) deadline {
	if ttl <= 0 {
		return deadline{}
	}
	return deadline{rel: ttl}
}

func (d deadline) none() bool { return d.abs == 0 && d.rel == 0 }

// at returns the deadline in ms since the epoch for the transaction's now,
// or 0 for none.
func (d deadline) at(now int64) int64 {
	if d.rel > 0 {
		return now + d.rel
	}
	return d.abs
}

// keyState is the transaction's view of one key.
type keyState struct {
	exists  bool
	val     string // encoded
	dl      deadline
	read    bool  // read from the server (WATCHed)
	wasLive bool  // live when read
	readDl  int64 // its deadline when read, 0 for none
	dirty   bool
}

// leaseState is the transaction's view of one lease hash.
type leaseState struct {
	exists  bool
	owner   string
	token   int64
	expires deadline // none once released (or never granted)
	dirty   bool
}

// live reports whether the lease is held at now.
func (ls *leaseState) live(now int64) bool {
	return ls.exists && ls.expires.at(now) > now
}

// close gives the connection back, unwatching what EXEC did not.
func (t *tx) close() {
	if t.conn == nil {
		return
	}
	if !t.execd && ctxDone(t.ctx) == nil {
		// Within the caller's deadline only: a connection given back
		// still watching keys costs its next transaction at most one
		// needless retry (EXEC clears every WATCH).
		_ = t.conn.Do(t.ctx, "UNWATCH").Err()
	}
	_ = t.conn.Close()
}

// fail records err as the transaction's failure if it stops the commit
// (the connection failed, the context ended, a cross-slot key) and returns
// it.
func (t *tx) fail(err error) error {
	if t.broken == nil {
		t.broken = err
	}
	return err
}

// usable refuses verbs after a failure inside the transaction.
func (t *tx) usable() error {
	if t.broken != nil {
		if errors.Is(t.broken, errRetry) {
			return t.broken
		}
		return fmt.Errorf("statekit: transaction failed earlier: %w", t.broken)
	}
	return nil
}

// bind makes sure the transaction has its connection, on the server that
// owns rkey, and that rkey shares the slot of every other key
// of the transaction. name is the statekit key or lease name.
func (t *tx) bind(rkey, name string) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.s.cluster != nil {
		sl := slot(rkey)
		if t.slot >= 0 && sl != t.slot {
			return t.fail(fmt.Errorf("%w: %q and %q lie in different cluster slots (%d and %d): every key and lease of a transaction must share one slot; give them one hash tag, as {user42}:balance and {user42}:history",
				state.ErrInvalidArgument, t.first, name, t.slot, sl))
		}
		t.slot = sl
	}
	if t.conn != nil {
		return nil
	}
	t.first = name
	c, err := t.s.client(t.ctx, rkey)
	if err != nil {
		return t.fail(t.s.fail(t.ctx, err, reads))
	}
	t.conn, t.addr = c.Conn(), c.Options().Addr
	return nil
}

// ensureNow gives the transaction its now, when no read gave it one yet,
// with a TIME of its own on its connection.
func (t *tx) ensureNow() error {
	if t.now != 0 {
		return nil
	}
	tm, err := t.conn.Time(t.ctx).Result()
	if err != nil {
		return t.fail(t.s.fail(t.ctx, on(t.addr, err), reads))
	}
	t.now = tm.UnixMilli()
	t.s.clock.observe(t.now)
	return nil
}

// Now is state's Tx.Now: the transaction's now, pinned, since the caller
// decides by it. Before the first key it takes a TIME of its own, which in a
// cluster has no server to ask: each master keeps its own time.
func (t *tx) Now() (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if t.conn == nil {
		if t.s.cluster != nil {
			return 0, t.fail(fmt.Errorf("%w: in a Redis Cluster a transaction's time is its keys' master's: read or write a key before asking for Now", state.ErrInvalidArgument))
		}
		if err := t.bind("", ""); err != nil {
			return 0, err
		}
	}
	if err := t.ensureNow(); err != nil {
		return 0, err
	}
	t.pinned = true
	return t.now, nil
}

// finalNow returns the server time the transaction's answers hold at, for
// hooks.NoteNow: its now, which its first verb set; for a transaction
// without a verb, which answered nothing, the store's estimate. ok is
// false when its first verb failed before it had a time.
func (t *tx) finalNow() (int64, bool) {
	switch {
	case t.now != 0:
		return t.now, true
	case t.conn == nil:
		return t.s.clock.nowMs(), true
	}
	return 0, false
}

// saw takes the server time t a read of the transaction ran at, and
// whether it found its key (or lease) absent. The first read's time is the
// transaction's now. A key absent at t > now may have expired after now,
// while the file engine still counts it live at now: now moves to t, or
// the attempt must start over when an answer already given holds only at
// the present now (see tx).
func (t *tx) saw(at int64, absent bool) error {
	t.s.clock.observe(at)
	switch {
	case t.now == 0:
		t.now = at
	case absent && at > t.now:
		if t.pinned || t.minLive != 0 && t.minLive <= at {
			return t.fail(errRetryNow)
		}
		t.now = at
	}
	return nil
}

// cmdErr handles the error of a command sent inside the transaction.
func (t *tx) cmdErr(err error) error {
	err = on(t.addr, err)
	if t.s.cluster != nil && redirect(err) {
		return t.fail(t.redirected(err))
	}
	return t.fail(t.s.fail(t.ctx, err, reads))
}

// redirected is the attempt's error for err, a cluster redirect its
// master answered. After MOVED the slot map is reloaded, so the next
// attempt binds to the master that owns the slot now; ASK leaves it as it
// is: the slot is migrating, and the master the map names still owns it.
func (t *tx) redirected(err error) *redirected {
	_, ask := askAddr(err)
	if !ask {
		t.s.cluster.ReloadState(t.ctx)
	}
	return &redirected{cause: t.s.fail(t.ctx, err, reads), ask: ask, slot: t.slot}
}

// key returns the state of key, read (and WATCHed) unless read is false
// and nothing is known of it yet: a blind write needs no read.
func (t *tx) key(key string, read bool) (*keyState, error) {
	rkey := t.s.keyOf(key)
	if err := t.bind(rkey, key); err != nil {
		return nil, err
	}
	ks := t.keys[rkey]
	if ks != nil {
		return ks, nil // read before, or overwritten whole by a blind write
	}
	if !read {
		// A blind write reads nothing, but the transaction claims its
		// time from its first verb on: one that only writes blind and
		// then fails has answered at it.
		if err := t.ensureNow(); err != nil {
			return nil, err
		}
		ks = &keyState{}
		t.keys[rkey] = ks
		return ks, nil
	}
	res, err := t.watchAndRead([]string{rkey})
	if err != nil {
		return nil, err
	}
	if err := t.loaded(rkey, res[0]); err != nil {
		return nil, err
	}
	return t.keys[rkey], nil
}

// readAll reads (and WATCHes) every key of keys not known yet in one round
// trip, as key would one at a time.
func (t *tx) readAll(keys []string) error {
	var rkeys []string
	for _, k := range keys {
		rkey := t.s.keyOf(k)
		if err := t.bind(rkey, k); err != nil {
			return err
		}
		if t.keys[rkey] == nil && !slices.Contains(rkeys, rkey) {
			rkeys = append(rkeys, rkey)
		}
	}
	if len(rkeys) == 0 {
		return nil
	}
	res, err := t.watchAndRead(rkeys)
	if err != nil {
		return err
	}
	for i, rkey := range rkeys {
		if err := t.loaded(rkey, res[i]); err != nil {
			return err
		}
	}
	return nil
}

// loaded takes the read script's reply for rkey into the transaction.
func (t *tx) loaded(rkey string, res []any) error {
	r := reply(res)
	found, err1 := r.int(1)
	at, err2 := r.int(2)
	v, err3 := r.str(0)
	if err := errors.Join(err1, err2, err3); err != nil {
		return t.fail(err)
	}
	if err := t.saw(r.now(), found != 1); err != nil {
		return err
	}
	ks := &keyState{read: true}
	if found == 1 {
		ks.exists, ks.wasLive, ks.val = true, true, v
		if at > 0 {
			ks.dl = deadline{abs: at}
			ks.readDl = at
			if t.minLive == 0 || at < t.minLive {
				t.minLive = at
			}
		}
	}
	t.keys[rkey] = ks
	return nil
}

// watchAndRead WATCHes rkeys and runs the read script on each, in one
// round trip (the time a transaction stays open is what other writers
// have to conflict with it), and returns the scripts' replies in order. A
// server that lost the script (NOSCRIPT, after a restart) gets it again
// after the WATCH, which holds. Errors are the transaction's (cmdErr).
func (t *tx) watchAndRead(rkeys []string) ([][]any, error) {
	for _, k := range rkeys {
		if !slices.Contains(t.asked, k) {
			t.asked = append(t.asked, k)
		}
	}
	var watch *redis.Cmd
	reads := make([]*redis.Cmd, len(rkeys))
	args := make([]any, 0, len(rkeys)+1)
	args = append(args, "WATCH")
	for _, k := range rkeys {
		args = append(args, k)
	}
	_, err := t.conn.Pipelined(t.ctx, func(p redis.Pipeliner) error {
		watch = p.Do(t.ctx, args...)
		for i, k := range rkeys {
			reads[i] = p.EvalSha(t.ctx, readScript.Hash(), []string{k})
		}
		return nil
	})
	if werr := watch.Err(); werr != nil {
		return nil, t.cmdErr(werr)
	}
	if err != nil && !noScript(err) {
		return nil, t.cmdErr(err)
	}
	out := make([][]any, len(rkeys))
	for i, k := range rkeys {
		res, err := reads[i].Slice()
		if err != nil && noScript(err) {
			res, err = readScript.Run(t.ctx, t.conn, []string{k}).Slice()
		}
		if err != nil {
			return nil, t.cmdErr(err)
		}
		out[i] = res
	}
	return out, nil
}

// noScript reports whether err is the server's NOSCRIPT: it does not have
// the script (yet, or since a restart), and ran nothing.
func noScript(err error) bool { return strings.HasPrefix(err.Error(), "NOSCRIPT") }

// commit sends the writes in MULTI/EXEC. A transaction that only read runs
// an empty MULTI/EXEC (checkWatches), so what it read is checked unchanged
// too.
func (t *tx) commit() error {
	if t.conn == nil {
		return nil
	}
	if t.writesNothing() {
		return t.checkWatches() // go-redis sends no MULTI/EXEC without a command
	}
	// The deadlines written are counted from the final now.
	if err := t.ensureNow(); err != nil {
		return err
	}
	if t.s.syncFull {
		// Before EXEC: on a store opened with SyncFull, writes are
		// refused, not sent, on a server that may lose them. The
		// transaction's connection was opened before this check, so
		// EXEC needs no check after it.
		if _, err := t.s.checkDurable(t.ctx, false); err != nil {
			return err
		}
	}
	if t.granted && t.checked {
		// Before EXEC: a grant is refused, not sent, on a server that
		// stopped keeping every write since the check.
		if err := t.s.recheckDurable(t.ctx, t.durableGen, true, nil); err != nil {
			return err
		}
	}
	cmds, err := t.conn.TxPipelined(t.ctx, func(p redis.Pipeliner) error {
		for _, rkey := range t.order {
			ks := t.keys[rkey]
			switch {
			case !ks.exists:
				p.Del(t.ctx, rkey)
			case ks.wasLive && ks.dl == deadline{abs: ks.readDl}:
				p.Do(t.ctx, "SET", rkey, ks.val, "KEEPTTL")
			case ks.dl.none():
				p.Do(t.ctx, "SET", rkey, ks.val)
			default:
				p.Do(t.ctx, "SET", rkey, ks.val, "PXAT", ks.dl.at(t.now))
			}
		}
		for rkey, ls := range t.leases {
			if ls.dirty {
				p.HSet(t.ctx, rkey, "owner", ls.owner, "token", ls.token, "expires", ls.expires.at(t.now))
			}
		}
		return nil
	})
	t.execd = true
	if err != nil {
		err = queuedErr(err, cmds...) // EXECABORT: why a write was refused (MOVED, OOM, ...)
	}
	if isConflict(err) {
		return errRetry
	}
	if err != nil {
		err = on(t.addr, err)
	}
	if err != nil && t.s.cluster != nil && redirect(err) {
		return t.redirected(err) // EXEC redirected, or refused for a command it redirected: nothing applied
	}
	if err != nil {
		err = t.s.fail(t.ctx, err, writes)
		if !strings.Contains(err.Error(), "transaction") {
			err = fmt.Errorf("%w (the transaction's EXEC)", err)
		}
		return err
	}
	if t.granted && t.s.cfg.waitReplicas > 0 {
		if err := t.s.waitReplicas(t.ctx, t.conn, t.addr); err != nil {
			return fmt.Errorf("the transaction committed a lease grant, but: %w", err)
		}
	}
	return nil
}
