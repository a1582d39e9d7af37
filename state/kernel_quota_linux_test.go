//go:build linux

package state_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["kernel-quota"] = helperQuotaSpent
	helperRoles["kernel-quota-checkpoint"] = helperQuotaCheckpoint
	helperRoles["kernel-quota-open"] = helperQuotaOpen
}

// Where the quota runs out: the WAL writes of the helper's process that the
// kernel refuses with EDQUOT, counted from its first (strace's when=).
const (
	quotaFirstRefused = 101
	quotaLastRefused  = 130
)

// TestKernelQuotaSpent: a write the kernel refuses because the disk quota
// is spent (EDQUOT) is ErrDiskFull saying so, as a full disk is, not an
// I/O error: the transaction leaves nothing, no token is used up, reads go
// on, a refused flush keeps its buffered increments, the handle lives and
// writes again once the quota has room. SQLite's native VFS, which Open
// uses, reports EDQUOT as a failed write (SQLITE_IOERR_WRITE), unlike
// ENOSPC. This kernel has no disk quotas to spend, so the helper process
// runs under strace, which makes the kernel fail its WAL writes numbered
// quotaFirstRefused to quotaLastRefused with EDQUOT (the write is not
// done), then lets them through: the quota freed.
func TestKernelQuotaSpent(t *testing.T) {
	strace := needStrace(t)
	path := filepath.Join(t.TempDir(), "q.state")
	cmd, out, trace := startInjected(t, strace, "kernel-quota", path, path+"-wal", "pwrite64", "EDQUOT",
		fmt.Sprintf("%d..%d", quotaFirstRefused, quotaLastRefused))

	var acked int
	_, err := fmt.Sscan(expectLine(t, out, "acked"), &acked)
	require.NoError(t, err)
	require.Positive(t, acked, "the quota ran out before any write")
	refused := expectLine(t, out, "refused")
	assert.Equal(t, "diskfull=true io=false edquot=true", expectLine(t, out, "kinds"), "the refused write: %s", refused)
	assert.True(t, strings.HasPrefix(refused, path+fmt.Sprintf(`: set "k%d": `, acked)), refused)
	assert.Contains(t, refused, "disk quota", refused)
	assert.Equal(t, "0", expectLine(t, out, "get k0"), "reads go on")
	assert.Equal(t, "diskfull=true", expectLine(t, out, "flush"), "a flush while the quota is spent")
	var token, refusals int
	_, err = fmt.Sscan(expectLine(t, out, "lease"), &token, &refusals)
	require.NoError(t, err)
	assert.Positive(t, refusals, "no lease was refused while the quota was spent")
	assert.Equal(t, 1, token, "a refused grant used up a token")
	assert.Equal(t, "ok", expectLine(t, out, "after"), "writes again once the quota has room")
	assert.Equal(t, "<nil>", expectLine(t, out, "flush again"), "the refused flush kept its deltas for this one")
	assert.Equal(t, "<nil>", expectLine(t, out, "close"))
	t.Logf("%d writes acknowledged, then: %s; %d grants refused, then token %d", acked, refused, refusals, token)
	require.NoError(t, cmd.Wait())
	assert.Equal(t, quotaLastRefused-quotaFirstRefused+1, injected(t, trace), "writes refused")

	ctx := t.Context()
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i := range acked {
		v, err := db.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err, "acknowledged k%d", i)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
	_, err = db.Get(ctx, fmt.Sprintf("k%d", acked))
	assert.ErrorIs(t, err, state.ErrNotFound, "the refused write left something behind")
	_, err = db.Get(ctx, "after")
	assert.NoError(t, err)
	v, err := db.Get(ctx, "buffered")
	require.NoError(t, err, "the buffered increment refused with the quota spent is lost")
	assert.Equal(t, "5", v.String())
	_, err = db.Lease(ctx, "job", "b", time.Minute)
	var held *state.LeaseHeldError
	require.ErrorAs(t, err, &held, "the lease granted after the refusals is lost")
	assert.Equal(t, "a", held.Owner)
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// helperQuotaSpent sets keys until one is refused, then reads, asks for a
// lease until one is granted, sets once more and closes, saying on stdout
// what each gave.
func helperQuotaSpent(path string) int {
	// strace counts each thread's writes apart: the verbs of this one
	// goroutine, group commits included, write on this thread alone (the
	// background flush, on a thread of its own, is put off).
	runtime.LockOSThread()
	ctx := context.Background()
	db, err := state.Open(path, state.WithFlushInterval(time.Hour))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	acked := 0
	var refused error
	for ; acked < 10_000; acked++ {
		if refused = db.Set(ctx, fmt.Sprintf("k%d", acked), acked); refused != nil {
			break
		}
	}
	fmt.Println("acked", acked)
	if refused == nil {
		fmt.Fprintln(os.Stderr, "no write was refused")
		return 4
	}
	fmt.Println("refused", strings.ReplaceAll(refused.Error(), "\n", " "))
	fmt.Printf("kinds diskfull=%v io=%v edquot=%v\n", errors.Is(refused, state.ErrDiskFull),
		errors.Is(refused, state.ErrIO), errors.Is(refused, syscall.EDQUOT))
	if v, err := db.Get(ctx, "k0"); err != nil {
		fmt.Println("get k0", err)
	} else {
		fmt.Println("get k0", v.String())
	}
	if err := db.IncrBuffered("buffered", 5); err != nil {
		fmt.Fprintln(os.Stderr, "incr buffered:", err)
		return 6
	}
	fmt.Printf("flush diskfull=%v\n", errors.Is(db.Flush(ctx), state.ErrDiskFull))
	refusals := 0
	for {
		l, err := db.Lease(ctx, "job", "a", time.Hour)
		if err == nil {
			fmt.Println("lease", l.Token, refusals)
			break
		}
		if !errors.Is(err, state.ErrDiskFull) || refusals == quotaLastRefused {
			fmt.Fprintln(os.Stderr, "lease:", err)
			return 5
		}
		refusals++
	}
	if err := db.Set(ctx, "after", 1); err != nil {
		fmt.Println("after", err)
	} else {
		fmt.Println("after ok")
	}
	fmt.Println("flush again", db.Flush(ctx))
	fmt.Println("close", db.Close())
	return 0
}

// TestKernelQuotaSpentInACheckpoint: the background checkpoint's writes to
// the database file refused with EDQUOT leave the checkpoint for later, as
// a full disk does; they do not end the handle. Every write of the run is
// acknowledged, and the file holds them all, sound, after Close.
func TestKernelQuotaSpentInACheckpoint(t *testing.T) {
	strace := needStrace(t)
	path := filepath.Join(t.TempDir(), "c.state")
	// Open writes the file 13 times (its first page, then the WAL's pages
	// twice: walrepair.go); the background checkpoints' writes come after.
	const first, last = 20, 25
	cmd, out, trace := startInjected(t, strace, "kernel-quota-checkpoint", path, path, "pwrite64", "EDQUOT",
		fmt.Sprintf("%d..%d", first, last))
	var n int
	_, err := fmt.Sscan(expectLine(t, out, "set"), &n)
	require.NoError(t, err)
	assert.Equal(t, quotaCheckpointSets, n, "a write failed")
	assert.Equal(t, "<nil>", expectLine(t, out, "close"))
	require.NoError(t, cmd.Wait())
	// strace counts each thread's calls apart (when=), and the
	// checkpoints run on threads of their own: so at least one refused.
	refused := injected(t, trace)
	assert.Positive(t, refused, "no write to the file was refused")
	t.Logf("%d writes to the file refused", refused)

	ctx := t.Context()
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i := range n {
		v, err := db.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err, "acknowledged k%d", i)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// quotaCheckpointSets is how many keys helperQuotaCheckpoint sets: enough
// for several background checkpoints.
const quotaCheckpointSets = 20_000

// helperQuotaCheckpoint sets keys through many background checkpoints and
// closes, saying how many it set before a write failed, if one did.
func helperQuotaCheckpoint(path string) int {
	ctx := context.Background()
	db, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	n := 0
	for ; n < quotaCheckpointSets; n++ {
		if err := db.Set(ctx, fmt.Sprintf("k%d", n), n); err != nil {
			fmt.Fprintln(os.Stderr, "set:", err)
			break
		}
	}
	fmt.Println("set", n)
	fmt.Println("close", db.Close())
	return 0
}

// TestKernelQuotaSpentAtOpen: an Open whose WAL repair (walrepair.go)
// finds the quota spent when it copies the WAL into the file fails with
// ErrDiskFull saying so, and leaves the file as sound as it found it: the
// next Open, with room, repairs it.
func TestKernelQuotaSpentAtOpen(t *testing.T) {
	strace := needStrace(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "o.state")
	// A handle left open keeps commits in the WAL for the helper's Open
	// to copy into the file.
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i := range 100 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	cmd, out, trace := startInjected(t, strace, "kernel-quota-open", path, path, "pwrite64", "EDQUOT", "1+")
	opened := expectLine(t, out, "open")
	assert.Equal(t, "diskfull=true io=false edquot=true", expectLine(t, out, "kinds"), "Open: %s", opened)
	assert.True(t, strings.HasPrefix(opened, "open "+path+": "), opened)
	assert.Contains(t, opened, "disk quota", opened)
	t.Logf("Open: %s", opened)
	require.NoError(t, cmd.Wait())
	assert.Positive(t, injected(t, trace), "no write to the file was refused")

	again, err := state.Open(path)
	require.NoError(t, err)
	defer again.Close()
	for i := range 100 {
		v, err := again.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
	findings, err := again.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// helperQuotaOpen opens path and says how that went.
func helperQuotaOpen(path string) int {
	db, err := state.Open(path)
	if err == nil {
		fmt.Println("open ok")
		_ = db.Close()
		return 0
	}
	fmt.Println("open", strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Printf("kinds diskfull=%v io=%v edquot=%v\n", errors.Is(err, state.ErrDiskFull),
		errors.Is(err, state.ErrIO), errors.Is(err, syscall.EDQUOT))
	return 0
}

// TestKernelQuotaSpentCreatingTheFile: an Open that creates the file with
// the quota spent (its first page refused with EDQUOT) fails with
// ErrDiskFull saying so, not ErrIO ("journal_mode: disk I/O error"), and
// leaves a file the next Open, with room, makes whole.
func TestKernelQuotaSpentCreatingTheFile(t *testing.T) {
	strace := needStrace(t)
	path := filepath.Join(t.TempDir(), "new.state")
	cmd, out, trace := startInjected(t, strace, "kernel-quota-open", path, path, "pwrite64", "EDQUOT", "1+")
	opened := expectLine(t, out, "open")
	assert.Equal(t, "diskfull=true io=false edquot=true", expectLine(t, out, "kinds"), "Open: %s", opened)
	assert.True(t, strings.HasPrefix(opened, "open "+path+": "), opened)
	assert.Contains(t, opened, "the disk quota is spent", opened)
	t.Logf("Open: %s", opened)
	require.NoError(t, cmd.Wait())
	assert.Positive(t, injected(t, trace), "no write to the file was refused")

	db, err := state.Open(path)
	require.NoError(t, err, "with room")
	defer db.Close()
	require.NoError(t, db.Set(t.Context(), "k", 1))
	findings, err := db.Check(t.Context())
	require.NoError(t, err)
	assert.Empty(t, findings)
}
