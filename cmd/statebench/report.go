package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one line of the report: a subject measured against a baseline.
type Result struct {
	Scenario string  `json:"scenario"`
	Subject  Measure `json:"subject"`
	Baseline Measure `json:"baseline"`
	// Ratio is the number the target is stated in: usually subject ops/s
	// over baseline ops/s; Unit says when it is something else.
	Ratio  float64            `json:"ratio"`
	Unit   string             `json:"unit,omitempty"`
	Target string             `json:"target"`
	Met    bool               `json:"met"`
	Notes  []string           `json:"notes,omitempty"`
	Extra  map[string]float64 `json:"extra,omitempty"`
}

// Report is the whole run.
type Report struct {
	Started   time.Time `json:"started"`
	GoVersion string    `json:"go_version"`
	GOOS      string    `json:"goos"`
	GOARCH    string    `json:"goarch"`
	CPUs      int       `json:"cpus"`
	Dir       string    `json:"dir"`
	Benchtime string    `json:"benchtime"`
	Count     int       `json:"count"`
	Rows      int       `json:"rows"`
	Command   string    `json:"command"`
	Results   []Result  `json:"results"`
	// Failed lists the scenarios that stopped with an error, and the
	// error; the others ran on, and their results are in Results.
	Failed []Failure `json:"failed,omitempty"`
}

// Failure is a scenario that stopped with an error.
type Failure struct {
	Scenario string `json:"scenario"`
	Error    string `json:"error"`
}

func newReport(e *env) *Report {
	return &Report{Started: time.Now().UTC().Round(time.Second), GoVersion: runtime.Version(),
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), Dir: e.dir,
		Benchtime: e.bt.String(), Count: e.count, Rows: e.rows, Command: strings.Join(os.Args, " ")}
}

// ratioResult builds the usual result: subject ops/s over baseline ops/s
// against a minimum. With interleaved slices the ratio is the median of the
// per-slice ratios, which a stall of a shared machine in one slice cannot
// move far; the ratio of the totals is kept in Extra.
func ratioResult(name string, subject, baseline Measure, min float64) Result {
	r := Result{Scenario: name, Subject: subject, Baseline: baseline,
		Target: fmt.Sprintf(">= %.1fx", min)}
	if baseline.OpsPerSec > 0 {
		r.Ratio = subject.OpsPerSec / baseline.OpsPerSec
		r.Extra = map[string]float64{"ratio_of_totals": r.Ratio}
	}
	if subject.PairedRatio > 0 {
		r.Ratio = subject.PairedRatio
	}
	r.Met = r.Ratio >= min
	return r
}

// print writes the report as a Markdown table, then the notes.
func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "statebench: %s %s/%s, %d CPUs, benchtime %s, count %d, rows %d\n\n",
		r.GoVersion, r.GOOS, r.GOARCH, r.CPUs, r.Benchtime, r.Count, r.Rows)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, " scenario\t subject\t ops/s\t p50 µs\t p99 µs\t baseline\t ops/s\t p50 µs\t p99 µs\t ratio\t target\t met\t")
	fmt.Fprintln(tw, " ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t ---\t")
	for _, x := range r.Results {
		met := "yes"
		if !x.Met {
			met = "NO"
		}
		if x.Target == "" {
			met = "-"
		}
		ratio := fmt.Sprintf("%.2fx", x.Ratio)
		switch {
		case x.Ratio == 0:
			ratio = "-"
		case x.Unit != "":
			ratio = fmt.Sprintf("%.2f %s", x.Ratio, x.Unit)
		}
		fmt.Fprintf(tw, " %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n",
			x.Scenario, x.Subject.Name, rate(x.Subject), num(x.Subject.P50Micros), num(x.Subject.P99Micros),
			x.Baseline.Name, rate(x.Baseline), num(x.Baseline.P50Micros), num(x.Baseline.P99Micros),
			ratio, x.Target, met)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, x := range r.Results {
		for _, n := range x.Notes {
			fmt.Fprintf(w, "- %s: %s\n", x.Scenario, n)
		}
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "- %s: FAILED: %s\n", f.Scenario, f.Error)
	}
}

func rate(m Measure) string {
	if m.OpsPerSec == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", m.OpsPerSec)
}

func num(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// writeJSON writes the report to path.
func (r *Report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
