package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/statekit/statekit/faults"
)

// totals sums the results of many seeds.
type totals struct {
	seeds, failed       int
	ops, recorded       int
	unknown, omitted    int
	noEffect            int
	opens, checks       int
	threads, overlap    int
	lostFlushes         int
	partialDels         int
	steps               int64
	virtualMillis       int64
	faults              map[string]int
	disk                faults.Stats // the simulated disks' counters, summed: what fired
	failures            []result
	slowest             result // the seed whose slowest partition took longest to check
	firstSeed, lastSeed uint64
}

func (t *totals) add(r result) {
	t.seeds++
	if t.seeds == 1 || r.Seed < t.firstSeed {
		t.firstSeed = r.Seed
	}
	t.lastSeed = max(t.lastSeed, r.Seed)
	if !r.ok() {
		t.failed++
		t.failures = append(t.failures, r)
	}
	if r.CheckSlowest > t.slowest.CheckSlowest || t.slowest.CheckPartition == "" {
		t.slowest = r
	}
	st := r.Stats
	t.ops += st.Ops
	t.recorded += st.Recorded
	t.unknown += st.Unknown
	t.omitted += st.Omitted
	t.noEffect += st.NoEffect
	t.opens += st.Opens
	t.checks += st.Checks
	t.threads += st.Threads
	t.overlap += st.Overlapping
	t.lostFlushes += st.LostFlushes
	t.partialDels += st.PartialDels
	t.steps += st.Steps
	t.virtualMillis += st.VirtualMillis
	for k, n := range st.Faults {
		t.faults[k] += n
	}
	t.disk.InjectedErrors += st.Disk.InjectedErrors
	t.disk.InjectedSyncErrors += st.Disk.InjectedSyncErrors
	t.disk.InjectedDirSyncErrors += st.Disk.InjectedDirSyncErrors
	t.disk.NoSpaceErrors += st.Disk.NoSpaceErrors
	t.disk.PowerLosses += st.Disk.PowerLosses
	t.disk.Crashes += st.Disk.Crashes
	t.disk.EvictedPages += st.Disk.EvictedPages
}

// runMany runs -seeds seeds from -from and prints a summary. An interrupt
// stops it: no seed more starts, the workers' seeds in flight are dropped,
// and the summary says which seeds ran.
func runMany(opt options, stdout, stderr io.Writer, interrupted interruptFunc) int {
	var stop <-chan struct{}
	release := func() {}
	if interrupted != nil {
		stop, release = interrupted()
	}
	t := &totals{faults: map[string]int{}}
	bar := newProgress(stderr, opt.seeds)
	start := time.Now()
	done := func(r result) bool {
		t.add(r)
		bar.update(t.seeds, t.failed)
		if opt.verbose || !r.ok() {
			bar.clear()
			fmt.Fprintln(stdout, r.summaryLine())
		}
		return r.ok() || opt.keepGoing
	}
	var (
		sent int      // seeds handed out: the first sent from -from
		lost []uint64 // seeds handed out that gave no result
		err  error
	)
	if opt.parallel == 1 {
		for i := range opt.seeds {
			if closed(stop) {
				break
			}
			cfg := opt.cfg
			cfg.Seed = opt.from + uint64(i)
			if opt.verbose {
				cfg.Trace = stdout
			}
			sent++
			if !done(runSeed(cfg, opt.htmlDir)) {
				break
			}
		}
	} else {
		sent, lost, err = runParallel(opt, stop, done)
	}
	elapsed := time.Since(start)
	release() // an interrupt from here on (say during -shrink) ends statesim
	bar.finish()
	printSummary(stdout, opt, t, elapsed)
	stopped := closed(stop)
	if stopped {
		fmt.Fprintf(stdout, "interrupted: %d of %d seeds ran (%s); not run: %s\n",
			t.seeds, opt.seeds, ranSeeds(opt.from, sent, lost), notRunSeeds(opt.from, sent, opt.seeds, lost))
	}
	if err != nil {
		fmt.Fprintln(stderr, "statesim:", err)
	}
	if t.failed == 0 {
		if err != nil || stopped {
			return exitUsage
		}
		return exitOK
	}
	slices.SortFunc(t.failures, func(a, b result) int { return cmp.Compare(a.Seed, b.Seed) })
	printFailure(stdout, opt, t.failures[0])
	if len(t.failures) > 1 {
		fmt.Fprintf(stdout, "other failing seeds (%d):\n", len(t.failures)-1)
		for _, f := range t.failures[1:] {
			cfg := opt.cfg
			cfg.Seed = f.Seed
			if f.Err != "" {
				fmt.Fprintf(stdout, "  seed %d could not run: %s\n", f.Seed, f.Err)
				continue
			}
			fmt.Fprintf(stdout, "  seed %d (%s): replay: %s -v\n", f.Seed, strings.Join(f.checks(), ","), cfg.ReplayLine())
		}
	}
	return exitViolation
}

// printSummary prints what the seeds did, in a few lines.
func printSummary(w io.Writer, opt options, t *totals, elapsed time.Duration) {
	secs := elapsed.Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	config := strings.Join(opt.cfg.Args()[2:], " ")
	if config == "" {
		config = "the defaults"
	}
	fmt.Fprintf(w, "seeds: %d run (%d..%d), %d failed; %s; config: %s\n",
		t.seeds, t.firstSeed, t.lastSeed, t.failed, count(opt.parallel, "worker", "workers"), config)
	fmt.Fprintf(w, "operations: %d by clients, %d recorded, %d unknown outcomes (%d more lost with nothing written, left out), %d refused on a full disk; %s, %s; %s of the key group that counted some of their keys\n",
		t.ops, t.recorded, t.unknown, t.noEffect, t.omitted, count(t.opens, "process start", "process starts"), count(t.checks, "integrity check", "integrity checks"),
		count(t.partialDels, "Del", "Dels"))
	fmt.Fprintf(w, "concurrency: %d goroutines scheduled, %d scheduling steps, %d operations called while another was in flight; %s (each held to its handle's next Flush or Close)\n",
		t.threads, t.steps, t.overlap, count(t.lostFlushes, "background flush that lost deltas", "background flushes that lost deltas"))
	var fs []string
	for _, k := range slices.Sorted(maps.Keys(t.faults)) {
		fs = append(fs, fmt.Sprintf("%s=%d", k, t.faults[k]))
	}
	fmt.Fprintf(w, "faults: %s\n", strings.Join(fs, " "))
	d := t.disk
	fmt.Fprintf(w, "fired on the disk: %s, %s, %s, %s refused for room, %s, %s\n",
		count(int(d.InjectedErrors-d.InjectedSyncErrors-d.InjectedDirSyncErrors), "failed read or write", "failed reads or writes"),
		count(int(d.InjectedSyncErrors), "failed sync", "failed syncs"),
		count(int(d.InjectedDirSyncErrors), "failed directory sync", "failed directory syncs"),
		count(int(d.NoSpaceErrors), "write", "writes"), count(int(d.PowerLosses), "power loss", "power losses"), count(int(d.Crashes), "crash", "crashes"))
	if d.EvictedPages > 0 { // -evictfailedsyncs
		fmt.Fprintf(w, "evicted from the page cache: %s of failed syncs, each then read as the disk had it\n",
			count(int(d.EvictedPages), "page", "pages"))
	}
	if t.slowest.CheckPartition != "" {
		fmt.Fprintf(w, "check: slowest partition %s of seed %d took %s (limit %s, per partition)\n",
			t.slowest.CheckPartition, t.slowest.Seed, roundCheck(t.slowest.CheckSlowest), limitString(opt.cfg.CheckTimeout))
	}
	virtual := time.Duration(t.virtualMillis) * time.Millisecond
	fmt.Fprintf(w, "time: %s real, %s virtual (%.0fx real time); %.0f simulated ops/s\n",
		elapsed.Round(time.Millisecond), virtual.Round(time.Second), virtual.Seconds()/secs, float64(t.ops)/secs)
}

// progress shows how far the seeds are: a bar redrawn in place on a
// terminal, a plain line every tenth otherwise.
type progress struct {
	w        io.Writer
	total    int
	terminal bool
	start    time.Time
	last     time.Time
	lastTen  int
	drawn    bool
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.terminal = true
		}
	}
	return p
}

// progressBarWidth is the bar's width in characters.
const progressBarWidth = 30

func (p *progress) update(done, failed int) {
	now := time.Now()
	if p.terminal {
		if now.Sub(p.last) < 100*time.Millisecond && done < p.total {
			return
		}
		p.last = now
		filled := progressBarWidth * done / max(p.total, 1)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d seeds, %d failed, %s ",
			strings.Repeat("=", filled), strings.Repeat(" ", progressBarWidth-filled),
			done, p.total, failed, now.Sub(p.start).Round(100*time.Millisecond))
		p.drawn = true
		return
	}
	if ten := 10 * done / max(p.total, 1); ten > p.lastTen || done == p.total {
		p.lastTen = ten
		fmt.Fprintf(p.w, "%d/%d seeds, %d failed, %s\n", done, p.total, failed, now.Sub(p.start).Round(100*time.Millisecond))
	}
}

// clear erases the bar before other output.
func (p *progress) clear() {
	if p.terminal && p.drawn {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", progressBarWidth+60))
		p.drawn = false
	}
}

func (p *progress) finish() {
	if p.terminal && p.drawn {
		fmt.Fprintln(p.w)
	}
}
