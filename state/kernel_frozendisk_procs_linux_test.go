//go:build linux

package state_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	inFlightProcs       = 3
	inFlightProcsRounds = 6
	// inFlightMaxBatches bounds the batches a round's cut comes after:
	// five writes a batch, so up to 8,000 writes (each process's
	// background checkpoint runs after its share of 4,000).
	inFlightMaxBatches = 1600
)

func init() {
	helperRoles["kernel-powercut-run"] = helperPowerCutRun
}

// helperPowerCutRun is a process of TestKernelPowerCutInFlightProcesses:
// it opens the file with the default options and says "ready"; on "go
// NAME" it runs batches, each granting the lease NAME to a new owner,
// releasing it and incrementing "n" three times, and says "ok TOKEN N"
// after each (the grant's token and the last increment's value), until
// "quit" or its first error ("err MESSAGE"). Then it closes the handle
// and says "closed CALLED ERROR": the increments it called, and Close's
// error or "-".
func helperPowerCutRun(path string) int {
	ctx := context.Background()
	db := helperOpen(path)
	if db == nil {
		return 3
	}
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return 4
	}
	name := strings.TrimPrefix(in.Text(), "go ")
	var quit atomic.Bool
	go func() {
		for in.Scan() && in.Text() != "quit" {
		}
		quit.Store(true)
	}()
	called := 0
	for i := 0; !quit.Load(); i++ {
		token, v, err := powerCutBatch(ctx, db, name, i, &called)
		if err != nil {
			fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
			break
		}
		fmt.Println("ok", token, v)
	}
	closeErr := "-"
	if err := db.Close(); err != nil {
		closeErr = strings.ReplaceAll(err.Error(), "\n", " ")
	}
	fmt.Println("closed", called, closeErr)
	return 0
}

// runningProc is what the test heard from one helperPowerCutRun.
type runningProc struct {
	name  string
	stdin io.WriteCloser
	mu    sync.Mutex
	token int64 // the highest acknowledged
	last  int64 // the counter's value at the end of the latest batch acknowledged
	prev  int64 // the same, one batch before
	// after the helper ended:
	errs   []string
	called int64
	done   chan struct{}
}

// listen reads p's lines until it ends, counting batches in batches.
func (p *runningProc) listen(out *bufio.Reader, batches *atomic.Int64) {
	defer close(p.done)
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, "ended without saying closed")
			p.mu.Unlock()
			return
		}
		f := strings.Fields(line)
		p.mu.Lock()
		switch {
		case len(f) == 3 && f[0] == "ok":
			var token, v int64
			if _, err := fmt.Sscan(f[1]+" "+f[2], &token, &v); err != nil {
				p.errs = append(p.errs, line)
			}
			p.token = max(p.token, token)
			p.prev, p.last = p.last, v
			batches.Add(1)
		case len(f) >= 3 && f[0] == "closed":
			_, _ = fmt.Sscan(f[1], &p.called)
			if f[2] != "-" {
				p.errs = append(p.errs, "close: "+strings.Join(f[2:], " "))
			}
			p.mu.Unlock()
			return
		default:
			p.errs = append(p.errs, strings.TrimSpace(line))
		}
		p.mu.Unlock()
	}
}

// TestKernelPowerCutInFlightProcesses: TestKernelPowerCutInFlight with
// three processes on the file (SQLite's shared memory and locks across
// processes, each process's own background checkpoints), running freely:
// each grants and releases a lease of its own and increments a shared
// counter three times, batch after batch, saying so after each. After a
// random number of batches in all, the disk stops at an instant
// (frozenDisk); the processes go on, quit and close without an error. The
// disk as the cut left it, mounted again, checks clean; every token
// acknowledged before the cut is there; and the counter holds, for each
// process, every increment of the batch before its last one acknowledged
// before the cut (that batch's grant, acknowledged after them, synced
// them), and no more than were called.
func TestKernelPowerCutInFlightProcesses(t *testing.T) {
	disk := mountFreezable(t)
	rng := powerCutRand(t)
	path := filepath.Join(disk.dir, "app.state")
	ctx := t.Context()
	var n int64 // the counter as the last round's cut left it
	for round := range inFlightProcsRounds {
		var batches atomic.Int64
		ps := make([]*runningProc, inFlightProcs)
		for i := range ps {
			_, stdin, out := startHelper(t, "kernel-powercut-run", path, nil, "")
			expectLine(t, out, "ready")
			ps[i] = &runningProc{name: fmt.Sprintf("r%d-p%d", round, i), stdin: stdin, done: make(chan struct{}), last: n, prev: n}
			go ps[i].listen(out, &batches)
		}
		for _, p := range ps {
			_, err := fmt.Fprintln(p.stdin, "go", p.name)
			require.NoError(t, err)
		}
		cutAfter := int64(1 + rng.IntN(inFlightMaxBatches))
		waitUntil(t, round, "batches", cutAfter, batches.Load, func() bool { return false })
		// What every process had acknowledged before the cut.
		acked := map[string]int64{}
		floor := n
		for _, p := range ps {
			p.mu.Lock()
			acked[p.name] = p.token
			floor = max(floor, p.prev)
			p.mu.Unlock()
		}
		disk.cut(t, round)
		var called int64
		for _, p := range ps {
			_, err := fmt.Fprintln(p.stdin, "quit")
			require.NoError(t, err)
			<-p.done
			assert.Empty(t, p.errs, "round %d: %s: the disk only paused", round, p.name)
			called += p.called
		}
		disk.reboot(t, round)

		tokens, got := openAfterCut(t, ctx, path, round)
		for name, token := range acked {
			assert.GreaterOrEqual(t, tokens[name], token, "round %d: %s was granted token %d and acknowledged", round, name, token)
		}
		assert.GreaterOrEqual(t, got, floor, "round %d: a durable increment was lost", round)
		assert.LessOrEqual(t, got, n+called, "round %d: more increments than were called", round)
		t.Logf("round %d: cut after %d batches; counter %d, durable floor %d, %d called", round, cutAfter, got, floor, called)
		n = got
	}
}
