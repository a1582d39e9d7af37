package main

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/statekit/statekit/state"
)

// churnWindow is how often the churn scenario reports the backlog.
const churnWindow = 10 * time.Second

// churnSample is how often the churn scenario reads the backlog.
const churnSample = time.Second

// runChurn is a busy cache: one goroutine sets fresh keys with a 1 s TTL as
// fast as it can for e.churn, on a file opened with the defaults (the
// background sweeper included). Every second another goroutine reads
// Stats().ExpiredKeys, the rows expired and not swept yet; every 10 s it
// reports the largest it saw in the window and the last, each also as
// seconds of sets at the writer's rate in that window. The target: the
// backlog at the end at most 2 s of sets, and no window's largest more than
// the one before it by over half a second of sets (the sampled backlog
// moves between nothing and a sweep interval's worth).
func runChurn(e *env) ([]Result, error) {
	path := e.path("churn.state")
	db, err := state.Open(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	value := []byte("a value of some thirty-two bytes")

	type window struct {
		sets    int64   // sets in the window
		rate    float64 // sets per second in the window
		maxLeft int64   // largest backlog sampled
		left    int64   // backlog at its end
	}
	var (
		windows []window
		all     sample
		sets    int64
	)
	done := make(chan error, 1)
	stop := make(chan struct{})
	var written atomic.Int64
	go func() {
		var s sample
		start := time.Now()
		var i int64
		for {
			select {
			case <-stop:
				s.elapsed = time.Since(start)
				all = s
				done <- nil
				return
			default:
			}
			t := time.Now()
			i++
			if err := db.Set(e.ctx, "churn:"+strconv.FormatInt(i, 10), value, state.TTL(time.Second)); err != nil {
				done <- err
				return
			}
			if i%8 == 0 {
				s.lat = append(s.lat, time.Since(t))
			}
			s.ops++
			written.Store(s.ops)
		}
	}()
	start := time.Now()
	w := window{}
	wStart, wSets := start, int64(0)
	tick := time.NewTicker(churnSample)
	defer tick.Stop()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("churn: set: %w", err)
			}
			return nil, fmt.Errorf("churn: the writer stopped early")
		case <-tick.C:
		}
		st, err := db.Stats(e.ctx)
		if err != nil {
			return nil, fmt.Errorf("churn: stats: %w", err)
		}
		w.maxLeft = max(w.maxLeft, st.ExpiredKeys)
		w.left = st.ExpiredKeys
		now := time.Since(start)
		running = now < e.churn
		if time.Since(wStart) >= churnWindow-churnSample/2 || !running {
			sets = written.Load()
			w.sets = sets - wSets
			w.rate = float64(w.sets) / time.Since(wStart).Seconds()
			windows = append(windows, w)
			e.logf("churn: %3.0f s: %d sets/s, backlog %d (%.2f s of sets), largest in the window %d (%.2f s)",
				now.Seconds(), int64(w.rate), w.left, float64(w.left)/w.rate, w.maxLeft, float64(w.maxLeft)/w.rate)
			wStart, wSets, w = time.Now(), sets, window{}
		}
	}
	close(stop)
	if err := <-done; err != nil {
		return nil, fmt.Errorf("churn: set: %w", err)
	}
	if len(windows) == 0 {
		return nil, fmt.Errorf("churn: no window measured (-churn %v)", e.churn)
	}
	last := windows[len(windows)-1]
	endSecs := float64(last.left) / last.rate
	grows := false
	var parts []string
	for i, x := range windows {
		secs := float64(x.maxLeft) / x.rate
		parts = append(parts, fmt.Sprintf("%.2f", secs))
		if i > 0 && secs > float64(windows[i-1].maxLeft)/windows[i-1].rate+0.5 {
			grows = true
		}
	}
	m := all.measure("Set+TTL 1s, fresh keys")
	r := Result{Scenario: "churn", Subject: m, Baseline: Measure{Name: "backlog in seconds of sets"},
		Ratio: endSecs, Unit: "s of sets", Target: "<= 2 s, not growing", Met: endSecs <= 2 && !grows}
	r.Extra = map[string]float64{"backlog_end": float64(last.left), "backlog_end_seconds": endSecs,
		"sets_per_sec": m.OpsPerSec, "seconds": all.elapsed.Seconds()}
	r.Notes = append(r.Notes, fmt.Sprintf("%d sets of fresh keys with a 1 s TTL in %v (%.0f/s), default options; the unswept backlog (Stats().ExpiredKeys) at the end %d, %.2f s of sets; the largest sampled each %v, in seconds of sets: %s",
		m.Ops, all.elapsed.Round(time.Second), m.OpsPerSec, last.left, endSecs, churnWindow, strings.Join(parts, ", ")))
	return []Result{r}, nil
}
