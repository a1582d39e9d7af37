package state

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// background runs the production goroutines: a sweeper and a flusher that
// wait through the Clock (see Sleeper), and a checkpointer (see
// checkpoint.go). The first two only sweep, as Sweep does but stopping
// between transactions once stop began, and flush. Without the
// checkpointer, SQLite checkpoints on the main connection as it always
// does. Under a simulator's scheduler (internal/hooks) every goroutine is
// started, and every wait decided, by the scheduler.
type background struct {
	done    chan struct{}
	stopped atomic.Bool // done is closed: read by a scheduler's ready
	running atomic.Int32
	wg      sync.WaitGroup
	once    sync.Once
	ckpt    checkpointer
}

// runsBackground reports whether the configuration asks for background goroutines.
func (c config) runsBackground() bool { return c.background && !c.readOnly }

// start launches the goroutines the configuration asks for.
func (b *background) start(db *DB) {
	b.done = make(chan struct{})
	if !db.cfg.runsBackground() {
		return
	}
	if db.remote == nil {
		// Before the sweeper and the flusher start: their writes tell
		// the checkpointer (checkpointer.wrote), which reads these.
		b.ckpt.kick = make(chan struct{}, 1)
		b.ckpt.every = db.cfg.checkpointEvery
	}
	if d := db.cfg.sweepInterval; d > 0 && db.remote == nil { // a remote store expires keys itself
		b.spawn(db, "sweeper", func() {
			// Every interval, or sooner after a pass that found a
			// backlog (sweepPause). A pass ends after the transaction
			// in flight once stop began.
			for pause := d; b.sleep(db, pause); {
				n, _ := db.sweep(context.Background(), b.stopped.Load)
				pause = sweepPause(d, n)
			}
		})
	}
	if d := db.cfg.flushInterval; d > 0 {
		b.every(db, "flusher", d, db.backgroundFlush)
	}
	if db.remote != nil {
		return // no file to checkpoint
	}
	b.spawn(db, "checkpointer", func() {
		for b.waitKick(db) {
			b.ckpt.checkpoint(db)
		}
	})
}

// spawn runs fn on a goroutine of its own, or of the scheduler's.
func (b *background) spawn(db *DB, name string, fn func()) {
	b.wg.Add(1)
	b.running.Add(1)
	run := func() {
		defer b.wg.Done()
		defer b.running.Add(-1)
		fn()
	}
	if s := db.cfg.sched; s != nil {
		s.Go(name, run)
		return
	}
	go run()
}

// every calls fn every d of the clock until stop. Errors are not lost: a
// fatal one ends the handle and the next call reports it; a busy flush
// keeps its deltas; any other error of a flush is kept for the next Flush
// or Close to return (backgroundFlush).
func (b *background) every(db *DB, name string, d time.Duration, fn func()) {
	b.spawn(db, name, func() {
		for b.sleep(db, d) {
			fn()
		}
	})
}

// sleep waits d, through the clock if it is a Sleeper, and reports false
// once stop has begun.
func (b *background) sleep(db *DB, d time.Duration) bool {
	if s, ok := db.cfg.clock.(Sleeper); ok {
		return s.Sleep(d, b.done) && !b.stopped.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.done:
		return false
	case <-t.C:
		return !b.stopped.Load() // select picks either when both are ready
	}
}

// waitKick waits for a checkpoint request and reports false once stop has
// begun.
func (b *background) waitKick(db *DB) bool {
	if s := db.cfg.sched; s != nil {
		s.Wait(func() bool { return len(b.ckpt.kick) > 0 || b.stopped.Load() })
		if b.stopped.Load() {
			return false
		}
		<-b.ckpt.kick
		return true
	}
	select {
	case <-b.done:
		return false
	case <-b.ckpt.kick:
		return true
	}
}

// stop ends the goroutines and waits for them. It is safe to call twice.
func (b *background) stop(db *DB) {
	b.once.Do(func() {
		b.stopped.Store(true)
		close(b.done)
	})
	if s := db.cfg.sched; s != nil {
		s.Wait(func() bool { return b.running.Load() == 0 })
		return
	}
	b.wg.Wait()
}
