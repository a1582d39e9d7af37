package state

import (
	"context"
	"sync"
	"time"
)

// background runs the production goroutines: a sweeper and a flusher on
// real-time tickers, and a checkpointer (see checkpoint.go). The first two
// only call Sweep and Flush, which a simulator calls itself at virtual times
// after WithoutBackground; without the checkpointer, SQLite checkpoints on
// the main connection as it always does.
type background struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	ckpt checkpointer
}

// runsBackground reports whether the configuration asks for background goroutines.
func (c config) runsBackground() bool { return c.background && !c.readOnly }

// start launches the goroutines the configuration asks for.
func (b *background) start(db *DB) {
	b.done = make(chan struct{})
	if !db.cfg.runsBackground() {
		return
	}
	if d := db.cfg.sweepInterval; d > 0 {
		b.every(d, func() { _, _ = db.Sweep(context.Background()) })
	}
	if d := db.cfg.flushInterval; d > 0 {
		b.every(d, func() { _ = db.Flush(context.Background()) })
	}
	b.ckpt.kick = make(chan struct{}, 1)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			select {
			case <-b.done:
				return
			case <-b.ckpt.kick:
				b.ckpt.checkpoint(db)
			}
		}
	}()
}

// every calls fn every d until stop. Errors are not lost: a fatal one ends
// the handle and the next call reports it; a busy flush keeps its deltas.
func (b *background) every(d time.Duration, fn func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// stop ends the goroutines and waits for them. It is safe to call twice.
func (b *background) stop() {
	b.once.Do(func() { close(b.done) })
	b.wg.Wait()
}
