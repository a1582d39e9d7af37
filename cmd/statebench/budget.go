package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// budget is how long one side of a scenario runs in one round: a duration,
// or a fixed number of operations ("500x"), as go test -benchtime takes.
type budget struct {
	d time.Duration
	n int64
}

// parseBudget reads a -benchtime value: "1s", "200ms" or "500x".
func parseBudget(s string) (budget, error) {
	if n, ok := strings.CutSuffix(s, "x"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v <= 0 {
			return budget{}, fmt.Errorf("benchtime %q: want a positive count before x", s)
		}
		return budget{n: v}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return budget{}, fmt.Errorf("benchtime %q: want a positive duration or a count like 500x", s)
	}
	return budget{d: d}, nil
}

func (b budget) String() string {
	if b.n > 0 {
		return strconv.FormatInt(b.n, 10) + "x"
	}
	return b.d.String()
}

// until returns a function that reports, after each operation, whether the
// budget is spent.
func (b budget) until() func(ops int64) bool {
	if b.n > 0 {
		return func(ops int64) bool { return ops >= b.n }
	}
	end := time.Now().Add(b.d)
	return func(ops int64) bool { return ops&15 == 0 && time.Now().After(end) }
}

// sample is what one side of a scenario did in one round.
type sample struct {
	ops     int64
	elapsed time.Duration
	lat     []time.Duration // per operation, or every sampleEvery-th
	pairs   []float64       // per interleaved slice: this rate over the other side's
}

// rate returns operations per second.
func (s sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.ops) / s.elapsed.Seconds()
}

// pairedRatio returns the median of the per-slice ratios, or 0 if none.
func (s sample) pairedRatio() float64 {
	if len(s.pairs) == 0 {
		return 0
	}
	p := slices.Clone(s.pairs)
	slices.Sort(p)
	if n := len(p); n%2 == 0 {
		return (p[n/2-1] + p[n/2]) / 2
	}
	return p[len(p)/2]
}

// loop runs op until the budget is spent and times every call.
func loop(b budget, op func() error) (sample, error) {
	var s sample
	done := b.until()
	start := time.Now()
	for {
		t := time.Now()
		if err := op(); err != nil {
			return s, err
		}
		s.lat = append(s.lat, time.Since(t))
		s.ops++
		if done(s.ops) {
			break
		}
	}
	s.elapsed = time.Since(start)
	return s, nil
}

// merge adds r to s: operations and latencies add up, and so do elapsed
// times, so ops/s over rounds is total operations over total time.
func (s *sample) merge(r sample) {
	s.ops += r.ops
	s.elapsed += r.elapsed
	s.lat = append(s.lat, r.lat...)
	s.pairs = append(s.pairs, r.pairs...)
}

// Measure is one side of a scenario as the report shows it.
type Measure struct {
	Name      string  `json:"name"`
	Ops       int64   `json:"ops"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Micros float64 `json:"p50_us"`
	P99Micros float64 `json:"p99_us"`
	MaxMicros float64 `json:"max_us"`
	// PairedRatio is the median, over interleaved slices, of this side's
	// ops/s over the other side's in the slice beside it (subject only).
	PairedRatio float64 `json:"paired_ratio,omitempty"`
	Slices      int     `json:"slices,omitempty"`
}

// measure summarises a sample.
func (s sample) measure(name string) Measure {
	m := Measure{Name: name, Ops: s.ops, Seconds: s.elapsed.Seconds(), OpsPerSec: s.rate(),
		PairedRatio: s.pairedRatio(), Slices: len(s.pairs)}
	if len(s.lat) > 0 {
		lat := slices.Clone(s.lat)
		slices.Sort(lat)
		m.P50Micros = micros(quantile(lat, 0.50))
		m.P99Micros = micros(quantile(lat, 0.99))
		m.MaxMicros = micros(lat[len(lat)-1])
	}
	return m
}

// quantile returns the q-quantile of sorted, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
