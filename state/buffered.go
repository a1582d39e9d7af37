package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/hooks"
)

// buffer holds increments not yet written.
type buffer struct {
	mu     sync.Mutex
	deltas map[string]int64
	// taken are the deltas the flush with the turn took, until it has
	// written, put back or reported them: IncrBuffered counts them in a
	// key's buffered sum, so putting them back cannot leave int64.
	taken  map[string]int64
	closed bool
	// turn is held by the flush that takes deltas from the buffer until
	// they are written, put back or reported: one flush at a time, so a
	// Flush waits for a background flush in flight (flushturn.go).
	turn chan struct{}
	// lost are the errors of background flushes that did not put their
	// deltas back, for the next Flush or Close to return; lostMore
	// counts those past maxLost.
	lost     []error
	lostMore int
}

// IncrBuffered adds delta to key in memory only. The sum reaches the file at
// the next background flush (every DefaultFlushInterval unless
// WithFlushInterval says otherwise), Flush, or Close, in one transaction
// with every other buffered key; until then Get does not see it.
//
// Loss window: a crash of the process loses the increments buffered since
// the last flush; a power loss can also lose flushed ones, as with any
// SyncNormal write. Use Incr when every increment must count.
//
// IncrBuffered returns ErrOverflow if the buffered sum for key would leave
// int64 (the buffer is then unchanged; the sum includes the deltas of a
// flush in flight, which go back into the buffer if it writes nothing),
// ErrInvalidKey for a bad key,
// ErrIO once the handle has failed, and ErrClosed after Close.
func (db *DB) IncrBuffered(key string, delta int64) error {
	if err := checkKey("key", key); err != nil {
		return db.namedKey("incrbuffered", key, err)
	}
	b := &db.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return db.named("incrbuffered", keyName(key), ErrClosed)
	}
	if db.cfg.readOnly {
		return db.named("incrbuffered", keyName(key), fmt.Errorf("%w: the handle was opened WithReadOnly", ErrReadOnly))
	}
	if db.dead.Load() {
		return db.named("incrbuffered", keyName(key), db.failedEarlier())
	}
	cur, ok := addInt64(b.deltas[key], delta)
	if ok {
		_, ok = addInt64(b.taken[key], cur)
	}
	if !ok {
		return db.named("incrbuffered", keyName(key), fmt.Errorf("buffered sum: %w", ErrOverflow))
	}
	b.deltas[key] = cur
	return nil
}

// addInt64 returns a+b and whether the sum stays inside int64.
func addInt64(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

// take empties the buffer and returns what it held, counted as taken until
// settle.
func (b *buffer) take() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.deltas
	b.deltas = map[string]int64{}
	b.taken = d
	return d
}

// isClosed reports whether Close has begun.
func (b *buffer) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// settle ends a flush of the deltas take returned: they are no longer
// taken, and back, those of them that were not written (all, or a cluster
// master's keys), go back into the buffer, added to what was buffered
// meanwhile; IncrBuffered kept each sum inside int64. overwrite is the
// planted bug FlushLosesConcurrent.
func (b *buffer) settle(back map[string]int64, overwrite bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taken = nil
	for k, v := range back {
		if overwrite {
			b.deltas[k] = v
			continue
		}
		b.deltas[k] += v
	}
}

// Flush writes the buffered increments in one transaction, keys in sorted
// order. A key whose stored value is bytes, or whose sum would overflow,
// loses its buffered delta and is named in the returned *FlushError (which
// wraps ErrNotInteger or ErrOverflow); the others are written. If the
// transaction cannot start, run or commit (ErrBusy, ErrDiskFull), nothing is
// written and the deltas go back into the buffer for the next flush; after
// an I/O error they are lost with the handle. On a Redis cluster a flush
// can write some masters' keys and not others': see FlushError. Flush
// returns ErrClosed after Close, and once the handle has failed, the error
// that ended it.
//
// Flush first waits for a background flush in flight (or until ctx ends),
// so when it returns nil every increment buffered before the call is
// written. It also returns, once, the errors of background flushes since
// the last Flush that did not keep their deltas for the next flush: a
// *FlushError for dropped keys, ErrOutcomeUnknown for a flush to a remote
// store whose answer was lost (its deltas are not sent again, which could
// count them twice), each naming the keys and deltas.
func (db *DB) Flush(ctx context.Context) error {
	if db.buf.isClosed() {
		return db.named("flush", "", ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		// Done before the call: it writes nothing, and leaves the errors
		// of background flushes for a Flush or Close that can report them.
		return db.named("flush", "", fmt.Errorf("statekit: %w", err))
	}
	if err, ok := db.bugFlushWithoutTurn(ctx); ok {
		return err
	}
	if err := db.takeTurn(ctx); err != nil {
		return db.named("flush", "", err)
	}
	defer db.giveTurn()
	if db.buf.isClosed() {
		return db.named("flush", "", ErrClosed) // Close ran while Flush waited
	}
	if db.bugEmptyFlush() {
		return nil
	}
	earlier := db.buf.takeLost()
	if db.dead.Load() {
		// A background flush that ended the handle lost its deltas:
		// earlier names them.
		return db.named("flush", "", joinErrors(earlier, db.failedEarlier()))
	}
	return db.named("flush", "", joinErrors(earlier, db.flushTaken(ctx, db.buf.take(), true)))
}

// failedEarlier is the error for a call on a handle that failed, read
// without mu: it wraps the error that ended the handle.
func (db *DB) failedEarlier() error {
	if failed := db.deadErr.Load(); failed != nil {
		return fmt.Errorf("the handle failed earlier, reopen the file: %w", *failed)
	}
	return fmt.Errorf("%w: the handle failed earlier, reopen the file", ErrIO)
}

// flushTaken writes deltas taken from the buffer and, when restore says so,
// puts back what it could not write, adding to what was buffered meanwhile.
func (db *DB) flushTaken(ctx context.Context, d map[string]int64, restore bool) error {
	if len(d) == 0 {
		return nil
	}
	var end func(int64, error, bool)
	var now int64
	if o := db.cfg.flushes; o != nil {
		var claimed func(int64)
		claimed, end = o.Flushing(maps.Clone(d))
		ctx = hooks.WithNow(ctx, func(ms int64) {
			now = ms
			if claimed != nil {
				claimed(ms)
			}
		})
	}
	err := db.flush(ctx, d)
	if !restore && db.remote == nil && errors.Is(err, errNotWritten) && errors.Is(err, ErrDiskFull) && db.makeRoom(ctx) {
		// Close's flush, the last chance to write these: the WAL's
		// space, given back, may be room enough.
		err = db.flush(ctx, d)
	}
	restored := restore && err != nil && errors.Is(err, errNotWritten)
	back := map[string]int64(nil)
	if restored {
		back = d
	}
	var fe *FlushError
	if !restored && errors.As(err, &fe) && len(fe.Kept) > 0 {
		back, err = keepOrDrop(d, fe, restore)
	}
	db.buf.settle(back, db.cfg.bugs.Has(bugs.FlushLosesConcurrent))
	if end != nil {
		end(now, err, restored)
	}
	if restored {
		err = fmt.Errorf("%w; the increments are kept for the next flush", err)
	}
	return err
}

// keepOrDrop settles a flush of d that wrote some keys and not fe.Kept's:
// when restore says so it returns their deltas, to go back into the buffer,
// and fe as it is; else (Close's flush, the last) nothing to put back and a
// FlushError that names them dropped.
func keepOrDrop(d map[string]int64, fe *FlushError, restore bool) (map[string]int64, error) {
	if restore {
		back := make(map[string]int64, len(fe.Kept))
		for k := range fe.Kept {
			back[k] = d[k]
		}
		return back, fe
	}
	dropped := maps.Clone(fe.Dropped)
	if dropped == nil {
		dropped = map[string]error{}
	}
	for k, kerr := range fe.Kept {
		dropped[k] = fmt.Errorf("%w; Close cannot keep it for a next flush", kerr)
	}
	return nil, &FlushError{Dropped: dropped}
}

// errNotWritten marks a flush that wrote nothing and may be retried.
var errNotWritten = errors.New("nothing written")

func (db *DB) flush(ctx context.Context, d map[string]int64) error {
	if len(d) == 0 {
		return nil
	}
	if db.remote != nil {
		return db.flushRemote(ctx, d)
	}
	keys := slices.Sorted(maps.Keys(d))
	dropped := map[string]error{}
	began := false
	err := db.do(ctx, writing, func(now int64) error {
		began = true
		if err := db.begin(ctx); err != nil {
			return notWritten(classify(ctx, err))
		}
		for _, k := range keys {
			if _, err := db.incrBy(ctx, now, k, d[k], 0); err != nil {
				if !keyRefused(err) || ctx.Err() != nil {
					// Not the key's own trouble: a full disk, say, on
					// which SQLite may have rolled the transaction back
					// already; the keys after it would be written one
					// by one, outside it, and again by the next flush.
					_, _ = db.st.rollback.ExecContext(context.WithoutCancel(ctx))
					return notWritten(err)
				}
				dropped[k] = fmt.Errorf("delta %d dropped: %w", d[k], err)
			}
		}
		if _, err := db.st.commit.ExecContext(ctx); err != nil {
			_, _ = db.st.rollback.ExecContext(context.WithoutCancel(ctx))
			return notWritten(classify(ctx, err))
		}
		return nil
	})
	if err != nil && !began && !fatal(err) {
		// Refused before the transaction (the high-water mark's write found
		// the disk full or the file busy): nothing was written.
		return notWritten(err)
	}
	if err != nil || len(dropped) == 0 {
		return err
	}
	return &FlushError{Dropped: dropped}
}

// keyRefused reports whether err is an increment's refusal of its key's
// value (bytes, or a sum outside int64), which changes nothing else: the
// flush drops that key's delta and goes on.
func keyRefused(err error) bool {
	return errors.Is(err, ErrNotInteger) || errors.Is(err, ErrOverflow)
}

// FlushError is the error Flush (and Close) return when some keys' buffered
// deltas could not be applied: their stored value is bytes (ErrNotInteger)
// or the sum would overflow (ErrOverflow). The other keys were written.
//
// On a Redis cluster a flush writes each master's keys in turn, so it can
// fail for some keys after others were written. A master that refused its
// keys or could not be reached (ErrUnavailable, ErrNotDurable, the context
// ending before they were sent) applied none of their deltas: those keys
// are in Kept, and their deltas are back in the buffer for the next flush
// (Close, which has no next flush, names them in Dropped). A master whose
// answer was lost (ErrOutcomeUnknown) may have applied them: those keys are
// in Dropped, and their deltas are not sent again, which could count them
// twice.
type FlushError struct {
	// Dropped maps each key whose delta was dropped to why.
	Dropped map[string]error
	// Kept maps each key whose delta was not applied, and went back into
	// the buffer for the next flush, to why; nil unless a flush to a Redis
	// cluster wrote some keys and not others.
	Kept map[string]error
}

// Error lists the dropped keys, then the kept ones, each in sorted order.
func (e *FlushError) Error() string {
	var b strings.Builder
	b.WriteString("statekit: flush")
	sep := ""
	for _, part := range []struct {
		what string
		keys map[string]error
	}{{"dropped", e.Dropped}, {"kept for the next flush", e.Kept}} {
		if len(part.keys) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s %s", sep, part.what)
		for i, k := range slices.Sorted(maps.Keys(part.keys)) {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %q (%v)", k, part.keys[k])
		}
		sep = ";"
	}
	return b.String()
}

// Unwrap returns the per-key errors, dropped then kept, so errors.Is finds
// ErrNotInteger or ErrOverflow.
func (e *FlushError) Unwrap() []error {
	out := make([]error, 0, len(e.Dropped)+len(e.Kept))
	for _, m := range []map[string]error{e.Dropped, e.Kept} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, m[k])
		}
	}
	return out
}

// lostDeltas reports whether err, what a flush of the buffer returned, lost
// deltas: some were dropped, or may or may not have been written; not when
// every delta was written or kept for the next flush.
func lostDeltas(err error) bool {
	if err == nil || errors.Is(err, errNotWritten) {
		return false
	}
	var fe *FlushError
	return !errors.As(err, &fe) || len(fe.Dropped) > 0
}

// notWritten marks err as a flush that wrote nothing, unless err ended the
// handle (then the deltas are lost with it).
func notWritten(err error) error {
	if fatal(err) {
		return err
	}
	return notWrittenError{err}
}

// notWrittenError is an error of a flush that wrote nothing: its message
// is its cause's, and it is errNotWritten too.
type notWrittenError struct{ error }

// Unwrap returns the cause.
func (e notWrittenError) Unwrap() error { return e.error }

// Is reports whether target is errNotWritten.
func (e notWrittenError) Is(target error) bool { return target == errNotWritten }

// closeBuffer stops IncrBuffered and returns what was left to flush, or
// false if it was already closed.
func (b *buffer) close() (map[string]int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false
	}
	b.closed = true
	d := b.deltas
	b.deltas = map[string]int64{}
	return d, true
}
