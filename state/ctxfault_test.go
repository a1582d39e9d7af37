package state_test

import (
	"context"
	"sync"
	"testing"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIOErrorAsTheContextEndsIsStillErrIO: a statement runs to its end
// whatever its verb's context does, so the context can end while a
// statement meets an I/O error. The verb is then ErrIO wrapping the cause,
// and the handle ends, as for any I/O error: the context's error would say
// the verb did nothing, when its outcome is unknown, and leave the handle
// going on past a failed write or read. Before, a verb whose context ended
// during the failed call returned "context canceled" and the handle wrote
// on.
func TestIOErrorAsTheContextEndsIsStillErrIO(t *testing.T) {
	verbs := []struct {
		name string
		op   faults.Op
		call func(ctx context.Context, db *state.DB) error
	}{
		{"Set", faults.OpWrite, func(ctx context.Context, db *state.DB) error { return db.Set(ctx, "a", "x") }},
		{"Incr", faults.OpWrite, fltIncr},
		{"Lease", faults.OpWrite, fltLease},
		{"Update", faults.OpWrite, func(ctx context.Context, db *state.DB) error {
			return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("b", "y") })
		}},
		{"Get", faults.OpRead, func(ctx context.Context, db *state.DB) error { _, err := db.Get(ctx, "a"); return err }},
	}
	for _, v := range verbs {
		t.Run(v.name, func(t *testing.T) {
			fm := newFltMachine(t)
			fs := &cancelOnCallFS{ProcessFS: fm.m.Process(1)}
			db, err := state.Open(fltPath, state.WithFS(fs), state.WithClock(fm.clock), state.WithoutBackground())
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			l := fm.history(db)
			// db's next read reaches the disk.
			require.NoError(t, fm.open(2).Set(fm.ctx, "a", "2"))

			ctx, cancel := context.WithCancel(fm.ctx)
			defer cancel()
			fs.arm(v.op, cancel)
			fm.m.FailAt(v.op, 1)
			err = v.call(ctx, db)
			require.Error(t, ctx.Err(), "the test needs the context ended by the failed call")
			require.ErrorIs(t, err, state.ErrIO, "an I/O error met as the context ended")
			assert.ErrorIs(t, err, faults.ErrInjected, "ErrIO wraps the file system's error")
			assert.NotErrorIs(t, err, context.Canceled, "the verb's outcome is unknown: not the context's error")
			fm.requireRefused(db, l)
		})
	}
}

// cancelOnCallFS is one process's view of a MemFS that, once armed, calls
// a cancel function at the next read or write of any file, just before the
// MemFS serves it.
type cancelOnCallFS struct {
	*faults.ProcessFS
	mu     sync.Mutex
	op     faults.Op
	cancel func()
}

// arm makes the next call of op (faults.OpRead or faults.OpWrite) call
// cancel first.
func (f *cancelOnCallFS) arm(op faults.Op, cancel func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.op, f.cancel = op, cancel
}

// fire calls the armed cancel function if op is the armed one, once.
func (f *cancelOnCallFS) fire(op faults.Op) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancel != nil && f.op == op {
		f.cancel()
		f.cancel = nil
	}
}

func (f *cancelOnCallFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	file, err := f.ProcessFS.Open(name, flags)
	if err != nil {
		return file, err
	}
	return &cancelOnCallFile{File: file, fs: f}, nil
}

type cancelOnCallFile struct {
	vfs.File
	fs *cancelOnCallFS
}

func (f *cancelOnCallFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.fire(faults.OpRead)
	return f.File.ReadAt(p, off)
}

func (f *cancelOnCallFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.fire(faults.OpWrite)
	return f.File.WriteAt(p, off)
}

// Dead passes on the MemFS file's, so that a dead file stays dead to SQLite.
func (f *cancelOnCallFile) Dead() bool {
	d, ok := f.File.(vfs.Mortal)
	return ok && d.Dead()
}
