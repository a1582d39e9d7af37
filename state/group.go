package state

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

// Group commit. The simple write verbs (Incr and the other increments, Set,
// Del, CAS, Expire) that goroutines call at the same moment share one
// transaction: whoever takes the handle's lock first runs every verb queued
// by then, each as its own statement, between one BEGIN IMMEDIATE and one
// COMMIT, and hands each caller its own result. A commit, with its locks and
// its WAL write, costs several times one statement, so eight goroutines on
// one hot key get more done together than one alone, where a lock alone
// would serialise them and a pool of connections would make them spin on
// SQLite's busy lock.
//
// Nothing a caller sees changes: each verb returns what it would have
// returned run alone in the order the group ran them, at the group's one
// engine time, none returns before the commit, and a statement error that
// SQLite confines to its statement (ErrNotInteger, ErrOverflow) stays with
// its verb. Any other error inside the group (a context done mid-statement,
// a full disk) rolls the transaction back, and then every verb of the group
// runs alone, as do runs it, with its own context and what is left of its
// busy timeout (a verb whose timeout went by while the group waited for
// another connection's lock is ErrBusy at once): nothing of the group had
// committed, so running them again is running them once. A fatal error (an
// I/O error, corruption) ends the handle and fails the whole group, which
// did not commit. A verb alone in the queue runs alone, in autocommit,
// exactly as do runs it.
//
// Lease grants group too: a grant must be synced before it is answered,
// and the sync of the WAL makes every commit before it durable, so grants
// called at the same moment share one FULL commit (one sync) instead of
// each waiting for its own. The other verbs of such a group commit first,
// NORMAL, in a transaction of their own, and are answered; then the grants,
// with the verbs queued meanwhile, commit FULL (grantsplit.go): a FULL
// commit is a NORMAL COMMIT followed by the engine's sync of the WAL
// (walsync.go), outside the file's write lock, and no verb of that
// transaction, a grant least of all, is answered before that sync is done.
// Before a group that must commit FULL runs, its leader yields for the
// grants its neighbours are about to call, so that they share its sync
// (gatherGrants); a grant that finds no other coming commits FULL in
// autocommit, as before. On a
// SyncFull handle none of this applies: every commit is synced after
// COMMIT, before any verb of it is answered.
// Renew and Release group as the simple writes do (NORMAL). A grant's
// ErrLeaseHeld, and Renew's and Release's ErrLeaseLost, stay with their
// verb, as ErrNotInteger does: the statement changed nothing.
//
// Sweep batches queue with these verbs, each run alone, so that a sweep and
// the verbs called beside it take turns (see doQueued): beside a writer
// that always has a verb queued, the sweep gets one turn in every
// sweepPasses+1.

// maxGroup bounds the verbs in one group transaction.
const maxGroup = 64

// The states of a queued verb.
const (
	opWaiting   int32 = iota // in the queue
	opDone                   // run; err is its result
	opLead                   // its caller is to take the lock and run the queue
	opWithdrawn              // taken out of the queue unrun: its caller's context ended first
)

// pending is one queued verb.
type pending struct {
	ctx    context.Context
	start  time.Duration // Clock.Monotonic() when the verb joined the queue
	waited time.Duration // how long it waited in the queue, set when it is taken (busy.go)
	a      access        // grouped, or sweeping: a batch that runs alone
	full   bool          // a lease grant: its commit is synced before it is answered (lease.go)
	fn     func(now int64) error
	early  int64         // 0 but with a planted bug (bugClaimEarly)
	passes int           // a sweep batch: groups of verbs that went before it (queue.takeUpTo)
	err    error         // the result, written before state becomes opDone
	state  atomic.Int32  // opWaiting, opDone, opLead or opWithdrawn
	wake   chan struct{} // buffered: the state changed
}

// finish gives o its result and wakes its caller.
func (o *pending) finish(err error) {
	o.err = err
	o.state.Store(opDone)
	o.signal()
}

func (o *pending) signal() {
	select {
	case o.wake <- struct{}{}:
	default: // a signal is pending already
	}
}

// queue holds the verbs waiting for the handle's lock.
type queue struct {
	mu        sync.Mutex
	ops       []*pending
	contended atomic.Bool // a caller found the handle's lock held
}

// push queues p and reports whether it is alone in the queue.
func (q *queue) push(p *pending) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ops = append(q.ops, p)
	return len(q.ops) == 1
}

// sweepPasses is how many groups of verbs queued behind a sweep batch go
// before it: beside a writer that always has a verb queued, a sweep gets
// one turn in sweepPasses+1, so that few of the writer's verbs wait for a
// sweep step (a step costs two or three verbs' time, most of it its
// COMMIT). A batch alone in the queue runs when its caller finds the lock
// free (follow's poll), so a sweep beside a writer that pauses between
// verbs is not held back past the pause.
const sweepPasses = 16

// take removes and returns the verbs to run next, for the caller of
// leader, who leads: up to maxGroup grouped ones, or a sweep batch alone.
func (q *queue) take(leader *pending) []*pending {
	return q.takeUpTo(maxGroup, leader)
}

// takeUpTo removes and returns the oldest verbs for the caller of leader:
// up to limit grouped ones, or, if leader is not nil and a sweep batch is
// oldest and its turn has come (passable), that batch alone. A sweep batch
// whose turn has not come stays first in the queue and the grouped verbs
// behind it go, which counts as a pass. With a nil leader (more verbs for
// a group already taken) it takes only grouped verbs, up to the first
// batch.
func (q *queue) takeUpTo(limit int, leader *pending) []*pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := leader != nil
	from := 0
	if batch && q.passable(leader) {
		q.ops[0].passes++
		from = 1
	}
	n := from
	for n < len(q.ops) && n-from < limit {
		if q.ops[n].a != grouped {
			if batch && n == from {
				n++
			}
			break
		}
		n++
	}
	ops := slices.Clone(q.ops[from:n])
	q.ops = slices.Delete(q.ops, from, n)
	return ops
}

// passable reports whether the oldest queued op is a sweep batch that
// grouped verbs queued behind it go before (sweepPasses). The batch of the
// caller who leads is not passed: that caller holds the lock, and running
// others' verbs meanwhile would make them wait for its thread. Callers
// hold q.mu.
func (q *queue) passable(leader *pending) bool {
	return len(q.ops) > 1 && q.ops[0].a == sweeping && q.ops[0] != leader &&
		q.ops[1].a == grouped && q.ops[0].passes < sweepPasses
}

// grantsQueued returns how many lease grants are queued (runSplit).
func (q *queue) grantsQueued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, o := range q.ops {
		if o.full {
			n++
		}
	}
	return n
}

// waiting reports whether a verb or sweep batch is queued for the lock: a
// sweep transaction commits as soon as one is (sweep.go).
func (q *queue) waiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ops) > 0
}

// remove takes p out of the queue and reports whether it was there: a
// leader that takes it first runs it.
func (q *queue) remove(p *pending) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.ops, p)
	if i < 0 {
		return false
	}
	q.ops = slices.Delete(q.ops, i, i+1)
	return true
}

// next returns the op whose caller is to lead next: the oldest, or, when
// grouped verbs go before a sweep batch (passable), the oldest of those;
// nil when the queue holds nothing, or only a sweep batch whose turn has
// not come: its caller takes the lock when it finds it free (follow).
func (q *queue) next() *pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case len(q.ops) == 0:
		return nil
	case q.passable(nil):
		return q.ops[1]
	case len(q.ops) == 1 && q.ops[0].a == sweeping && q.ops[0].passes < sweepPasses:
		return nil
	}
	return q.ops[0]
}

// doQueued is do for a verb that may share a transaction with the verbs
// other goroutines call at the same moment (a grouped verb), and for a
// sweep batch, which runs alone but queues with them, so that verbs and
// batches take turns: a verb waits for at most one batch, and a sweep
// makes progress however busy the handle is, one batch after at most
// sweepPasses groups of the verbs queued behind it. A grouped verb is one the
// package comment above names: its fn has no effect but its statements and
// the result it stores, so it may run twice (see runGroup).
//
// Whoever finds the lock free leads: it runs the queue, its own verb with
// it. The others wait for their result without touching the lock, so they
// are free to queue their next verb while a group runs; whoever unlocks
// appoints the caller of the verb to run next (queue.next) to lead.
func (db *DB) doQueued(ctx context.Context, a access, fn func(now int64) error) error {
	return db.enqueue(ctx, &pending{ctx: ctx, a: a, fn: fn})
}

// doGrant is doQueued for a lease grant, whose commit must be FULL: alone
// or in a group that it makes FULL (see the package comment above).
func (db *DB) doGrant(ctx context.Context, fn func(now int64) error) error {
	return db.enqueue(ctx, &pending{ctx: ctx, a: grouped, full: true, fn: fn})
}

// enqueue queues p and returns its result (doQueued).
func (db *DB) enqueue(ctx context.Context, p *pending) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("statekit: %w", err)
	}
	if early := db.bugClaimEarly(ctx); early != 0 {
		fn := p.fn
		p.early, p.fn = early, func(int64) error { return fn(early) }
	}
	if s := db.cfg.sched; s != nil {
		s.Wait(nil) // joining the queue is a scheduling point
	}
	a := p.a
	p.start = db.cfg.clock.Monotonic()
	p.wake = make(chan struct{}, 1)
	alone := db.q.push(p)
	// A sweep batch takes the lock at once only if no verb is queued
	// before it: it waits its turn, so verbs and batches alternate.
	if (a != sweeping || alone) && db.mu.TryLock() {
		db.lead(p)
		return p.err
	}
	db.q.contended.Store(true)
	return db.follow(p)
}

// followPoll is how often a queued verb's caller tries the lock itself.
// Every holder appoints a leader when it unlocks (DB.unlock); this covers
// a holder that does not.
const followPoll = time.Millisecond

// follow waits until p has run, or its caller is appointed to lead and
// runs it, or p's context ends while no leader has taken it: then p leaves
// the queue unrun (withdraw) and its caller gets the context's error, so a
// verb of the handle stuck in the kernel (a disk that stalls) holds no
// queued caller past its deadline.
func (db *DB) follow(p *pending) error {
	if db.cfg.sched != nil {
		return db.followScheduled(p)
	}
	t := time.NewTimer(followPoll)
	defer t.Stop()
	done := p.ctx.Done()
	for {
		select {
		case <-p.wake:
		case <-done:
			if db.withdraw(p) {
				return fmt.Errorf("statekit: %w", p.ctx.Err())
			}
			done = nil // a leader took it: it runs, and its result is the answer
		case <-t.C:
			t.Reset(followPoll)
			if p.state.Load() != opDone && db.mu.TryLock() {
				db.lead(p)
				return p.err
			}
		}
		switch p.state.Load() {
		case opDone:
			return p.err
		case opLead:
			// Appointed. If another caller took the lock meanwhile, its
			// unlock signals p again (appointNext): waiting for that keeps
			// p's deadline.
			if db.mu.TryLock() {
				db.lead(p)
				return p.err
			}
		}
	}
}

// withdraw takes p out of the queue unrun, if no leader has taken it, and
// reports whether it did. A caller appointed to lead hands the appointment
// on to the next.
func (db *DB) withdraw(p *pending) bool {
	if !db.q.remove(p) {
		return false
	}
	if p.state.Swap(opWithdrawn) == opLead {
		db.appointNext()
	}
	return true
}

// followScheduled is follow under a scheduler: p's caller waits until p
// has run, or until it may lead (appointed, or, as follow's poll, the lock
// is free) and has taken the lock.
func (db *DB) followScheduled(p *pending) error {
	leading := false
	db.cfg.sched.Wait(func() bool {
		if p.state.Load() == opDone {
			return true
		}
		leading = db.mu.TryLock()
		return leading
	})
	if leading {
		db.lead(p)
	}
	return p.err
}

// unlock releases mu and appoints the caller of the oldest queued verb to
// lead next. After unlocking: a verb queued after the look found the lock
// free, or held by a holder that looks again when it unlocks.
func (db *DB) unlock() {
	db.mu.Unlock()
	db.appointNext()
}

// appointNext appoints the caller of the oldest queued verb to lead, or
// signals it again if it is appointed already (it found the lock taken by
// another caller and waits for this unlock). A verb withdrawn after the
// look is looked past.
func (db *DB) appointNext() {
	for {
		next := db.q.next()
		if next == nil {
			return
		}
		if next.state.CompareAndSwap(opWaiting, opLead) {
			next.signal()
			return
		}
		switch next.state.Load() {
		case opLead:
			next.signal()
			return
		case opWithdrawn:
			continue
		}
		return
	}
}

// lead runs queued verbs until p has run, then unlocks mu, appointing the
// next leader. Callers hold mu.
func (db *DB) lead(p *pending) {
	defer db.unlock()
	for p.state.Load() != opDone {
		if db.q.contended.Swap(false) {
			// Others called while the lock was held: the callers of the
			// last group are likely runnable on this thread, about to
			// queue their next verb. Let them, so it joins this group.
			if s := db.cfg.sched; s != nil {
				s.Wait(nil)
			} else {
				runtime.Gosched()
			}
		}
		ops := db.q.take(p)
		if len(ops) == 0 {
			panic("statekit: a queued verb left the queue without running")
		}
		db.runGroup(ops)
	}
}

// runGroup runs ops, together if there are several, the grants apart
// from the rest if both are there (runSplit), and grants with those their
// neighbours are about to call (gatherGrants). Callers hold mu.
func (db *DB) runGroup(ops []*pending) {
	if normal, full := db.splitGrants(ops); len(normal) > 0 {
		db.runSplit(normal, full)
		return
	}
	if db.fullGroup(ops) {
		ops = db.gatherGrants(ops, 0)
	}
	db.runOne(ops)
}

// runOne runs ops as one group: together if there are several. Callers
// hold mu.
func (db *DB) runOne(ops []*pending) {
	defer func() {
		for _, o := range ops {
			if o.state.Load() != opDone { // fn panicked: the panic goes on in the leader
				o.finish(errors.New("statekit: a verb run in the same transaction panicked"))
			}
		}
	}()
	if err := db.usable(ops[0].a); err != nil {
		for _, o := range ops {
			o.finish(err)
		}
		return
	}
	// The group's own waits (the high-water mark's write, BEGIN) end no
	// later than the earliest deadline among its callers; the mark's write
	// is not cut short by one caller's cancellation, which would fail the
	// others.
	// Their waits for another connection's lock end with the budget of
	// the verb that waited longest in the queue (busy.go).
	taken := db.cfg.clock.Monotonic()
	gctx, waited := ops[0].ctx, time.Duration(0)
	for i, o := range ops {
		o.waited = taken - o.start
		waited = max(waited, o.waited)
		if i == 0 {
			continue
		}
		if d, ok := o.ctx.Deadline(); ok {
			if cur, ok := gctx.Deadline(); !ok || d.Before(cur) {
				gctx = o.ctx
			}
		}
	}
	db.setWait(gctx, waited)
	now := bugLatestEarly(ops)
	if now == 0 {
		now = db.time.nowMillis()
		for _, o := range ops {
			db.claimed(o.ctx, now)
		}
	}
	if err := db.advanceHWM(context.WithoutCancel(gctx), now); err != nil {
		err = db.note(err)
		if !errors.Is(err, ErrBusy) || fatal(err) {
			for _, o := range ops {
				o.finish(err)
			}
			return
		}
		// The wait for another connection's lock ended at the earliest
		// deadline among the callers, or with the budget of the one that
		// waited longest: each verb goes on alone, on its own.
		for _, o := range ops {
			o.finish(db.runAfterGroup(o, now, err, true))
		}
		return
	}
	var busy error
	if len(ops) > 1 {
		settled, beginBusy := db.runTogether(gctx, ops, now)
		if settled {
			return
		}
		busy = beginBusy
	}
	for _, o := range ops {
		o.finish(db.runAfterGroup(o, now, busy, false))
	}
}

// runAfterGroup runs o alone, after its group did not settle it (or as the
// only verb of its group), writing the high-water mark first when mark
// says the group could not. Its budget counts from its call: the group's
// waits count, and a verb whose busy timeout went by while its group
// waited for another connection's lock (which had the grace, busyGrace,
// of the verb that waited longest) gets that wait's ErrBusy, busy, at
// once, rather than a budget again. Callers hold mu.
func (db *DB) runAfterGroup(o *pending, now int64, busy error, mark bool) error {
	if err := o.ctx.Err(); err != nil {
		return fmt.Errorf("statekit: %w", err)
	}
	o.waited = db.cfg.clock.Monotonic() - o.start
	if busy != nil && o.waited >= db.cfg.busyTimeout {
		return busy
	}
	if mark {
		db.setWait(o.ctx, o.waited)
		if err := db.advanceHWM(o.ctx, now); err != nil {
			return db.note(err)
		}
		o.waited = db.cfg.clock.Monotonic() - o.start
	}
	return db.runAlone(o, now)
}

// runAlone runs one verb or sweep batch in autocommit, as do does. Callers
// hold mu.
func (db *DB) runAlone(o *pending, now int64) error {
	if err := o.ctx.Err(); err != nil {
		return fmt.Errorf("statekit: %w", err)
	}
	if err := db.usable(o.a); err != nil {
		return err
	}
	db.setWait(o.ctx, o.waited)
	fn := o.fn
	if o.full {
		fn = func(now int64) error { return db.grantAlone(o.ctx, func() error { return o.fn(now) }) }
	}
	err := db.note(fn(now))
	if serr := db.syncCommitted(err == nil && o.a != sweeping); serr != nil {
		return serr
	}
	if err != nil {
		return err
	}
	if o.a == sweeping {
		return nil
	}
	db.bg.ckpt.wrote(1)
	db.afterWrite(o.ctx, now)
	return nil
}

// runTogether runs ops in one transaction; BEGIN IMMEDIATE, which may wait
// for another process's lock, waits no longer than ctx allows. It reports
// true when that settled every op: it committed, or a fatal error ended the
// handle. On false nothing of it is left and no op is done; busy is
// BEGIN's ErrBusy when another connection held the lock past the group's
// budget. Callers hold mu.
func (db *DB) runTogether(ctx context.Context, ops []*pending, now int64) (settled bool, busy error) {
	full := db.fullGroup(ops)
	if err := db.begin(ctx); err != nil {
		if err = classify(ctx, err); errors.Is(err, ErrBusy) && !fatal(err) {
			return false, db.note(err)
		}
		return false, nil
	}
	committed := false
	defer func() {
		if !committed {
			_, _ = db.st.rollback.ExecContext(context.WithoutCancel(ctx))
		}
	}()
	errs := make([]error, len(ops))
	for i, o := range ops {
		err := o.fn(now)
		switch {
		case err == nil || errors.Is(err, ErrNotInteger) || errors.Is(err, ErrOverflow) ||
			errors.Is(err, ErrLeaseHeld) || errors.Is(err, ErrLeaseLost):
			errs[i] = err
		case fatal(err):
			db.failGroup(ops, err)
			return true, nil
		default:
			return false, nil
		}
	}
	if db.cfg.bugs.Has(bugs.GroupErrorLeak) {
		bugLeakError(errs)
	}
	if db.cfg.bugs.Has(bugs.GroupEarlyAnswer) {
		for i, o := range ops {
			o.finish(errs[i])
		}
	}
	if db.cfg.bugs.Has(bugs.GroupedGrantEarly) {
		bugAnswerGrants(ops, errs)
	}
	if _, err := db.st.commit.ExecContext(context.WithoutCancel(ctx)); err != nil {
		if err = classify(ctx, err); fatal(err) {
			db.failGroup(ops, err)
			return true, nil
		}
		return false, nil
	}
	committed = true
	if err := db.syncCommitted(true); err != nil {
		db.failGroup(ops, err)
		return true, nil
	}
	if full {
		// A grant is in the group: the WAL is synced after COMMIT, outside
		// the file's write lock, before any verb of the group is answered
		// (walsync.go); even when the group wrote nothing (a holder asked
		// again for the deadline it has), since a grant must leave every
		// commit before it durable.
		if err := db.syncGrant(); err != nil {
			db.failGroup(ops, err)
			return true, nil
		}
	}
	for i, o := range ops {
		if errs[i] == nil {
			db.bg.ckpt.wrote(1)
			db.afterWrite(o.ctx, now)
		}
		o.finish(errs[i])
	}
	return true, nil
}

// fullGroup reports whether ops must commit FULL (synced after COMMIT): one
// of them is a grant, and the handle's commits are not synced already.
func (db *DB) fullGroup(ops []*pending) bool {
	if db.cfg.sync == SyncFull || db.cfg.bugs.Has(bugs.LeaseNormalSync) {
		return false
	}
	for _, o := range ops {
		if o.full {
			return true
		}
	}
	return false
}

// failGroup ends the handle on a fatal error met inside a group and gives
// every verb of it that error: nothing of the group committed (or, for a
// grant's sync that failed after COMMIT, it may not be durable), and after
// an I/O error nothing is retried. Callers hold mu.
func (db *DB) failGroup(ops []*pending, err error) {
	err = db.note(err)
	for _, o := range ops {
		o.finish(err)
	}
}

// begin runs BEGIN IMMEDIATE. On an error it rolls back: the driver reports
// the context's error when the context ends as the statement finishes, even
// if the transaction did begin, and a transaction left open would swallow
// every later autocommit write of the handle. Callers hold mu.
func (db *DB) begin(ctx context.Context) error {
	_, err := db.st.begin.ExecContext(ctx)
	if err != nil {
		_, _ = db.st.rollback.ExecContext(context.WithoutCancel(ctx))
	}
	return err
}
