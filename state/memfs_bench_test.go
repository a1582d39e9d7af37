package state_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// BenchmarkEngineCommit measures engine commits per second through
// state.DB, on the simulator's faults.MemFS beside the native SQLite VFS on
// a file in the test's temporary directory, in the same run: Incr commits
// with synchronous=NORMAL, a Lease grant with synchronous=FULL. The
// simulator's speed rests on the memfs numbers; faults' BenchmarkCommit
// measures the same below the engine, in raw SQLite.
//
//	go test -run '^$' -bench EngineCommit ./state/
func BenchmarkEngineCommit(b *testing.B) {
	disks := []struct {
		name string
		open func(b *testing.B, clock *faults.Clock) *state.DB
	}{
		{"memfs", func(b *testing.B, clock *faults.Clock) *state.DB {
			return benchOpen(b, "bench.state", clock, state.WithFS(faults.NewMemFS(1).Process(1)))
		}},
		{"native", func(b *testing.B, clock *faults.Clock) *state.DB {
			return benchOpen(b, filepath.Join(b.TempDir(), "bench.state"), clock)
		}},
	}
	verbs := []struct {
		name   string
		commit func(ctx context.Context, db *state.DB, clock *faults.Clock) error
	}{
		{"incr", func(ctx context.Context, db *state.DB, _ *faults.Clock) error {
			_, err := db.Incr(ctx, "n")
			return err
		}},
		{"lease", func(ctx context.Context, db *state.DB, clock *faults.Clock) error {
			clock.Advance(2 * time.Millisecond) // the last grant expired: a new token each time
			_, err := db.Lease(ctx, "job", "worker", time.Millisecond)
			return err
		}},
	}
	for _, v := range verbs {
		for _, d := range disks {
			b.Run(v.name+"/"+d.name, func(b *testing.B) {
				ctx := context.Background()
				clock := newClock()
				db := d.open(b, clock)
				for b.Loop() {
					if err := v.commit(ctx, db, clock); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}

// benchOpen opens path with clock and no background work, closed when the
// benchmark ends.
func benchOpen(b *testing.B, path string, clock *faults.Clock, opts ...state.Option) *state.DB {
	b.Helper()
	db, err := state.Open(path, append([]state.Option{state.WithClock(clock), state.WithoutBackground()}, opts...)...)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	return db
}
