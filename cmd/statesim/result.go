package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statekit/statekit/sim"
)

// result is what one seed's run found: all a worker process sends back.
type result struct {
	Seed       uint64          `json:"seed"`
	Trace      string          `json:"trace"`
	Summary    string          `json:"summary"`
	Stats      sim.Stats       `json:"stats"`
	Violations []sim.Violation `json:"violations,omitempty"`
	// CheckSlowest is the longest one partition's linearizability check
	// took, and CheckPartition that partition (wall-clock: not part of
	// the trace).
	CheckSlowest   time.Duration `json:"check_slowest"`
	CheckPartition string        `json:"check_partition,omitempty"`
	HTML           string        `json:"html,omitempty"`     // the porcupine view written, if any
	HTMLErr        string        `json:"html_err,omitempty"` // why it could not be written
	Err            string        `json:"err,omitempty"`      // the run could not start
}

func (r result) ok() bool { return r.Err == "" && len(r.Violations) == 0 }

// checks returns the failed checks' names, sorted, without repeats.
func (r result) checks() []string {
	var out []string
	for _, v := range r.Violations {
		if !slices.Contains(out, v.Check) {
			out = append(out, v.Check)
		}
	}
	slices.Sort(out)
	return out
}

// checkLine says how long the run's slowest partition took to check,
// against the limit.
func (r result) checkLine(limit time.Duration) string {
	if r.CheckPartition == "" {
		return "check: no partition checked"
	}
	return fmt.Sprintf("check: slowest partition %s took %s (limit %s)", r.CheckPartition, roundCheck(r.CheckSlowest), limitString(limit))
}

// roundCheck rounds a check's time for printing: to the millisecond, or
// the microsecond below one.
func roundCheck(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// limitString prints a check's time limit, 0 as none.
func limitString(limit time.Duration) string {
	if limit == 0 {
		return "none"
	}
	return limit.String()
}

func (r result) summaryLine() string {
	if r.Err != "" {
		return fmt.Sprintf("seed %d: %s", r.Seed, r.Err)
	}
	return r.Summary
}

// runSeed runs cfg in this process and writes the HTML view of a failing
// partition into htmlDir.
func runSeed(cfg sim.Config, htmlDir string) result {
	rep, err := sim.Run(cfg)
	if err != nil {
		return result{Seed: cfg.Seed, Err: err.Error()}
	}
	res := result{Seed: cfg.Seed, Trace: rep.Trace, Summary: rep.Summary(), Stats: rep.Stats, Violations: rep.Violations,
		CheckSlowest: rep.Linearizability.Slowest, CheckPartition: rep.Linearizability.SlowestPartition}
	if rep.OK() {
		return res
	}
	path := filepath.Join(htmlDir, "statesim-"+strconv.FormatUint(cfg.Seed, 10)+".html")
	switch err := rep.WriteHTML(path); {
	case err == nil:
		res.HTML = path
	case !errors.Is(err, sim.ErrNoHTML):
		res.HTMLErr = err.Error()
	}
	return res
}

// violationsShown bounds the violations of one check printed.
const violationsShown = 3

// printFailure prints what a failed run found, the file with its view,
// the line that replays it and, with -shrink, a smaller one.
func printFailure(w io.Writer, opt options, res result) {
	cfg := opt.cfg
	cfg.Seed = res.Seed
	cfg.Trace = nil
	if res.Err != "" {
		fmt.Fprintf(w, "seed %d could not run: %s\n", res.Seed, res.Err)
		return
	}
	fmt.Fprintf(w, "\nFAIL seed %d: %s\n", res.Seed, strings.Join(res.checks(), ", "))
	shown := map[string]int{}
	for _, v := range res.Violations {
		if shown[v.Check]++; shown[v.Check] <= violationsShown {
			fmt.Fprintf(w, "\n--- check %s\n%s\n", v.Check, strings.TrimRight(v.Detail, "\n"))
		}
	}
	for _, c := range res.checks() {
		if n := shown[c] - violationsShown; n > 0 {
			fmt.Fprintf(w, "\n(%d more %s violations; -v shows them all)\n", n, c)
		}
	}
	fmt.Fprintln(w)
	switch {
	case res.HTML != "":
		fmt.Fprintf(w, "porcupine view of the failing partition: %s\n", res.HTML)
	case res.HTMLErr != "":
		fmt.Fprintf(w, "porcupine view not written: %s\n", res.HTMLErr)
	}
	fmt.Fprintf(w, "replay: %s -v\n", cfg.ReplayLine())
	if !opt.shrink {
		return
	}
	check := res.Violations[0].Check
	small, rep, err := sim.Shrink(cfg, check, opt.shrinkMax)
	switch {
	case err != nil:
		fmt.Fprintf(w, "shrink: %v\n", err)
	case rep == nil:
		fmt.Fprintf(w, "shrink: no smaller run fails %s\n", check)
	default:
		fmt.Fprintf(w, "shrunk (%d ops, %s): %s\n", small.Ops, check, small.ReplayLine())
	}
}
