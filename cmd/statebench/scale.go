package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/statekit/statekit/state"
)

// scaleFarDeadline is the deadline of the scale file's live keys: far in the
// future (2100-01-01, unix ms), so that they sit in the deadline index as
// the keys of a cache do.
const scaleFarDeadline = "4102444800000"

// scaleBatch is the plain DELETE's batch: what a developer would pick.
const scaleBatch = 1000

// scaleCache is a directory where the scale scenario keeps the file it
// fills (scale-<keys>.state), and reuses it on the next run: filling ten
// million keys takes minutes. Registered here, beside its only reader.
var scaleCache = flag.String("scale-cache", "", "directory where the scale scenario keeps its filled file and reuses it (empty: fill it every run)")

// runScale measures statekit on a big file (-scale-keys, 10 million by
// default, behind -scale because it takes minutes). Every tenth key has a
// deadline long past, spread among the others as keys written over time
// with mixed TTLs are; the rest have a deadline far ahead. One file is
// filled and copied, so every side starts from the same pages:
//
//   - Sweep alone: statekit's Sweep of the expired tenth with nobody else
//     writing, against a plain batched DELETE (scaleBatch rows a
//     statement, SQLite's automatic checkpoint) on a copy: rows/s over
//     rows/s (target >= 0.7x);
//   - Sweep beside Incr: an Incr loop on random keys of a third copy, in
//     slices that alternate idle and beside a Sweep until the sweep is
//     done: p99 over idle p99 (target <= 3x);
//   - Set+TTL and Incr on random keys of the swept statekit file against
//     the naive upsert on the swept plain file, interleaved: ops/s ratio
//     (>= 1.0x) and p50 ratio (<= 1.1x).
func runScale(e *env) ([]Result, error) {
	keys := e.scaleKeys
	expired := keys / 10
	pristine, cached, err := scaleFile(e, keys)
	if err != nil {
		return nil, err
	}
	alone, beside, plain := e.path("scale-alone.state"), e.path("scale-beside.state"), e.path("scale.naive.db")
	for _, p := range []string{alone, beside, plain} {
		if err := copyFile(pristine, p); err != nil {
			return nil, err
		}
	}
	if !cached {
		if err := os.Remove(pristine); err != nil {
			return nil, err
		}
	}

	// The plain DELETE first, then statekit's Sweep, on copies of one file.
	e.logf("scale: plain batched DELETE of %d rows", expired)
	n, err := openNaive(plain)
	if err != nil {
		return nil, err
	}
	defer n.close()
	del, err := n.db.Prepare(naiveSweepSQL)
	if err != nil {
		return nil, err
	}
	defer del.Close()
	var plainRows int64
	t := time.Now()
	for {
		res, err := del.ExecContext(e.ctx, sweepNow, scaleBatch)
		if err != nil {
			return nil, fmt.Errorf("plain delete: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		plainRows += k
		if k < scaleBatch {
			break
		}
	}
	plainTime := time.Since(t)
	plainRate := float64(plainRows) / plainTime.Seconds()
	e.logf("scale: plain DELETE: %d rows in %v, %.0f rows/s", plainRows, plainTime.Round(time.Millisecond), plainRate)

	e.logf("scale: statekit Sweep of %d rows, nobody else writing", expired)
	db, err := state.Open(alone, state.WithSweepInterval(0))
	if err != nil {
		return nil, err
	}
	defer func() { db.Close() }()
	t = time.Now()
	swept, err := db.Sweep(e.ctx)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	sweepTime := time.Since(t)
	sweepRate := float64(swept) / sweepTime.Seconds()
	e.logf("scale: Sweep: %d rows in %v, %.0f rows/s", swept, sweepTime.Round(time.Millisecond), sweepRate)
	if int64(swept) != plainRows || swept != expired {
		return nil, fmt.Errorf("sweep deleted %d rows, the plain DELETE %d, of %d expired", swept, plainRows, expired)
	}
	sweepRes := Result{Scenario: "scale-sweep",
		Subject:  Measure{Name: fmt.Sprintf("Sweep, %dM keys", keys/1_000_000), Ops: int64(swept), Seconds: sweepTime.Seconds(), OpsPerSec: sweepRate},
		Baseline: Measure{Name: fmt.Sprintf("DELETE ... LIMIT %d", scaleBatch), Ops: plainRows, Seconds: plainTime.Seconds(), OpsPerSec: plainRate},
		Ratio:    sweepRate / plainRate, Target: ">= 0.7x", Met: sweepRate/plainRate >= 0.7}
	sweepRes.Notes = append(sweepRes.Notes, fmt.Sprintf("%d expired rows (every tenth key) of a %d-key file, nobody else writing: statekit's Sweep %v (%.0f rows/s), a plain DELETE of %d rows a statement in a loop with SQLite's automatic checkpoint %v (%.0f rows/s); rows/s per second of each, one after the other on copies of one file",
		expired, keys, sweepTime.Round(time.Millisecond), sweepRate, scaleBatch, plainTime.Round(time.Millisecond), plainRate))

	besideRes, err := scaleBeside(e, beside, keys)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(beside); err != nil {
		return nil, err
	}

	// The verbs on the two swept files: keys at random over the whole key
	// space (a tenth of them now absent). Incr first, while every value is
	// an integer.
	rs, rn := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	key := func(r *rand.Rand) string { return fmt.Sprintf("key:%09d", 1+r.IntN(keys)) }
	value := []byte("a value of some thirty-two bytes")
	if err := db.Close(); err != nil {
		return nil, err
	}
	if db, err = state.Open(alone); err != nil {
		return nil, err
	}
	e.logf("scale: Incr at %d keys", keys)
	sk, nv, err := interleave(e,
		func(b budget) (sample, error) {
			return loop(b, func() error { _, err := db.Incr(e.ctx, key(rs)); return err })
		},
		func(b budget) (sample, error) {
			return loop(b, func() error { _, err := n.doIncr(e.ctx, key(rn)); return err })
		})
	if err != nil {
		return nil, err
	}
	incrRes := scaleVerbResult("scale-incr", sk.measure(fmt.Sprintf("Incr, %dM keys", keys/1_000_000)), nv.measure("naive upsert"))
	e.logf("scale: Set+TTL at %d keys", keys)
	sk, nv, err = interleave(e,
		func(b budget) (sample, error) {
			return loop(b, func() error { return db.Set(e.ctx, key(rs), value, state.TTL(time.Hour)) })
		},
		func(b budget) (sample, error) {
			return loop(b, func() error { return n.doSet(e.ctx, key(rn), value, time.Hour) })
		})
	if err != nil {
		return nil, err
	}
	setRes := scaleVerbResult("scale-set-ttl", sk.measure(fmt.Sprintf("Set+TTL, %dM keys", keys/1_000_000)), nv.measure("naive upsert"))
	return []Result{sweepRes, besideRes, setRes, incrRes}, nil
}

// scaleFile returns the path of a filled scale file of keys keys, and
// whether it is -scale-cache's, to be kept: the cached one if it is there,
// else a file filled now (in -scale-cache when set).
func scaleFile(e *env, keys int) (string, bool, error) {
	pristine := e.path("scale.state")
	if *scaleCache != "" {
		pristine = fmt.Sprintf("%s/scale-%d.state", *scaleCache, keys)
		if _, err := os.Stat(pristine); err == nil {
			e.logf("scale: reusing %s", pristine)
			return pristine, true, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", false, err
		}
	}
	// Filled under a temporary name, renamed when complete: a run cut
	// short leaves no half-filled file to reuse.
	filling := pristine + ".filling"
	_ = os.Remove(filling)
	db, err := state.Open(filling)
	if err != nil {
		return "", false, err
	}
	if err := db.Close(); err != nil {
		return "", false, err
	}
	e.logf("scale: writing %d keys, %d of them expired", keys, keys/10)
	t := time.Now()
	if err := fill(filling, keys, "key:", "CASE WHEN i % 10 = 0 THEN i ELSE "+scaleFarDeadline+" END"); err != nil {
		return "", false, err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(filling + suffix); err == nil {
			return "", false, fmt.Errorf("scale: %s%s left beside the filled file", filling, suffix)
		}
	}
	if err := os.Rename(filling, pristine); err != nil {
		return "", false, err
	}
	st, _ := os.Stat(pristine)
	e.logf("scale: written in %v, %.0f MiB", time.Since(t).Round(time.Second), float64(st.Size())/(1<<20))
	return pristine, *scaleCache != "", nil
}

// scaleVerbResult is the ops/s ratio of a verb at scale, with its p50
// ratio as the second target.
func scaleVerbResult(name string, subject, baseline Measure) Result {
	r := ratioResult(name, subject, baseline, 1.0)
	p50 := 0.0
	if baseline.P50Micros > 0 {
		p50 = subject.P50Micros / baseline.P50Micros
	}
	r.Extra["p50_ratio"] = p50
	r.Target = ">= 1.0x, p50 <= 1.1x"
	r.Met = r.Met && p50 <= 1.1
	r.Notes = append(r.Notes, fmt.Sprintf("random keys of the whole key space, interleaved: ops/s %.2fx (median of slices; totals %.2fx), p50 %.1f µs against %.1f µs (%.2fx), p99 %.0f µs against %.0f µs",
		r.Ratio, r.Extra["ratio_of_totals"], subject.P50Micros, baseline.P50Micros, p50, subject.P99Micros, baseline.P99Micros))
	return r
}

// scaleBeside runs an Incr loop on random keys of the file at path, in
// slices of sliceTime that alternate: idle, then beside a Sweep of its
// expired rows (started for the slice and cancelled at its end; a
// cancelled sweep transaction deletes nothing), until the sweep finds
// nothing left, so that both sides see the same noise from a shared
// machine. The ratio is the beside slices' p99 over the idle slices'.
func scaleBeside(e *env, path string, keys int) (Result, error) {
	db, err := state.Open(path, state.WithSweepInterval(0))
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	r := rand.New(rand.NewPCG(3, 4))
	incr := func() error {
		_, err := db.Incr(e.ctx, fmt.Sprintf("key:%09d", 1+r.IntN(keys)))
		return err
	}
	if _, err := loop(budget{n: 200}, incr); err != nil { // warm-up
		return Result{}, err
	}
	e.logf("scale: Incr idle and beside a Sweep, alternating in slices of %v", sliceTime)
	ab, err := alternateBeside(e.ctx, db, incr)
	if err != nil {
		return Result{}, err
	}
	idle, busy, rows, sweepTime, slices := ab.idle, ab.busy, ab.rows, ab.sweepTime, ab.slices
	during, before := busy.measure("Incr beside Sweep"), idle.measure("Incr idle")
	out := Result{Scenario: "scale-beside", Subject: during, Baseline: before, Unit: "x p99", Target: "p99 <= 3x"}
	if before.P99Micros > 0 {
		out.Ratio = during.P99Micros / before.P99Micros
	}
	out.Met = out.Ratio <= 3
	out.Extra = map[string]float64{"rows": float64(rows), "sweep_seconds": sweepTime.Seconds(), "slices": float64(slices)}
	out.Notes = append(out.Notes, fmt.Sprintf("Incr on random keys of a %d-key file, in %d pairs of %v slices, idle then beside a Sweep (cancelled at the slice's end), which deleted %d rows in %v (%.0f rows/s, Incr's inline sweeps took the rest): Incr p99 %.0f µs against %.0f µs idle (%.2fx), p50 %.1f against %.1f µs, %.0f against %.0f ops/s",
		keys, slices, sliceTime, rows, sweepTime.Round(time.Millisecond), float64(rows)/sweepTime.Seconds(),
		during.P99Micros, before.P99Micros, out.Ratio, during.P50Micros, before.P50Micros, during.OpsPerSec, before.OpsPerSec))
	return out, nil
}

// copyFile copies the file at src (with no WAL beside it) to dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
