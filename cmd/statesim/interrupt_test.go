package main

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// interruptOnWrite is a stderr that plays Ctrl-C at its first write: the
// progress line statesim writes once the first seed is done.
type interruptOnWrite struct {
	bytes.Buffer
	once sync.Once
	c    chan struct{}
}

func newInterruptOnWrite() *interruptOnWrite { return &interruptOnWrite{c: make(chan struct{})} }

func (w *interruptOnWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return w.Buffer.Write(p)
}

func (w *interruptOnWrite) interrupts() (<-chan struct{}, func()) { return w.c, func() {} }

func TestInterruptSaysWhichSeedsRan(t *testing.T) {
	var out bytes.Buffer
	errOut := newInterruptOnWrite()
	code := run([]string{"-seeds", "10", "-from", "30", "-ops", "50", "-parallel", "1"}, &out, errOut, errOut.interrupts)
	assert.Equal(t, exitUsage, code, "an interrupted run that found nothing has not passed")
	assert.Contains(t, out.String(), "seeds: 1 run (30..30), 0 failed")
	assert.Contains(t, out.String(), "interrupted: 1 of 10 seeds ran (30); not run: 31..39")
}

func TestInterruptStopsTheWorkers(t *testing.T) {
	t.Setenv(asStatesim, "1") // the workers are this test binary
	var out bytes.Buffer
	errOut := newInterruptOnWrite()
	code := run([]string{"-seeds", "10", "-from", "30", "-ops", "50", "-parallel", "2"}, &out, errOut, errOut.interrupts)
	require.Equal(t, exitUsage, code, out.String()+errOut.String())
	// Either worker may have finished its seed first, or both: 30, 31 or 30..31.
	assert.Regexp(t, `interrupted: [12] of 10 seeds ran \(3[01](\.\.31)?\); not run: `, out.String())
	assert.NotContains(t, errOut.String(), "worker:", "a worker stopped for the interrupt is no worker failure")
}

func TestInterruptedRunKeepsItsFailure(t *testing.T) {
	var out bytes.Buffer
	errOut := newInterruptOnWrite()
	code := run([]string{"-seeds", "10", "-ops", "300", "-bug", "read-ignores-deadline", "-keep-going", "-parallel", "1", "-html", t.TempDir()}, &out, errOut, errOut.interrupts)
	assert.Equal(t, exitViolation, code, out.String())
	assert.Contains(t, out.String(), "interrupted: 1 of 10 seeds ran (1); not run: 2..10")
	assert.Contains(t, out.String(), "replay: statesim -seed 1 -ops 300 -bug read-ignores-deadline -v")
}
