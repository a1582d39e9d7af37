package state

import (
	"context"
	"sync"
	"time"
)

// background runs the production goroutines: a sweeper and a flusher on
// real-time tickers. They only call Sweep and Flush, which a simulator calls
// itself at virtual times after WithoutBackground.
type background struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// start launches the goroutines the configuration asks for.
func (b *background) start(db *DB) {
	b.done = make(chan struct{})
	if !db.cfg.background || db.cfg.readOnly {
		return
	}
	if d := db.cfg.sweepInterval; d > 0 {
		b.every(d, func() { _, _ = db.Sweep(context.Background()) })
	}
	if d := db.cfg.flushInterval; d > 0 {
		b.every(d, func() { _ = db.Flush(context.Background()) })
	}
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
