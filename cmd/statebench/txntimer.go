package main

import (
	"fmt"
	"runtime/metrics"
	"time"
)

// txnTimer times transactions, and around each reads what the operating
// system counts for the thread running it (CPU time, context switches) and
// how many garbage collections ended meanwhile, so that a long transaction
// can be told apart: work of its own (on CPU for most of it), the scheduler
// giving its CPU to another thread or process (involuntary switches, off
// CPU), or a wait in the kernel (voluntary switches). Those reads come
// before the opening clock read and after the closing one, outside the time
// measured. begin and end must be called on one goroutine, in turn.
type txnTimer struct {
	began  time.Time
	before threadStat
	known  bool   // before was read
	gcs    uint64 // GC cycles ended before the transaction
	txns   []txnProbe
}

// txnProbe is one transaction as the timer saw it.
type txnProbe struct {
	wall       time.Duration
	cpu        time.Duration // the thread's CPU time meanwhile (known only)
	vol, invol int64         // the thread's context switches meanwhile
	gcs        uint64        // GC cycles that ended meanwhile
	known      bool          // the thread counters are the transaction's: one thread, running it only
}

// probeSlack is how much longer than the transaction the window of the
// thread counters may be: they are read just outside the clock reads.
const probeSlack = 20 * time.Microsecond

// begin starts timing a transaction and returns the time it began.
func (m *txnTimer) begin() time.Time {
	m.gcs = gcCycles()
	m.before, m.known = readThreadStat()
	m.began = time.Now()
	return m.began
}

// end ends timing the transaction begin started and returns the time.
func (m *txnTimer) end() time.Time {
	now := time.Now()
	after, ok := readThreadStat()
	t := txnProbe{wall: now.Sub(m.began), gcs: gcCycles() - m.gcs,
		known: ok && m.known && after.tid == m.before.tid}
	if t.known {
		t.cpu = after.cpu - m.before.cpu
		t.vol, t.invol = after.vol-m.before.vol, after.invol-m.before.invol
		// More CPU time than wall time: the thread ran other goroutines
		// meanwhile, so its counters are not the transaction's.
		if t.cpu > t.wall+probeSlack {
			t = txnProbe{wall: t.wall, gcs: t.gcs}
		}
	}
	m.txns = append(m.txns, t)
	return now
}

// gcSample reads the number of GC cycles ended so far.
var gcSample = []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}

func gcCycles() uint64 {
	metrics.Read(gcSample)
	if gcSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return gcSample[0].Value.Uint64()
}

// result returns the transactions timed.
func (m *txnTimer) result() sample {
	s := sample{ops: int64(len(m.txns))}
	for _, t := range m.txns {
		s.lat = append(s.lat, t.wall)
		s.elapsed += t.wall
	}
	return s
}

// slowTxn is how long a transaction must take for the timer to explain it.
const slowTxn = time.Millisecond

// outliers sums up the transactions longer than slowTxn: how many there
// were, how many spent most of their time off CPU after the scheduler took
// the thread's CPU away (preempted) or waiting in the kernel (blocked), how
// many were on CPU for most of it, how many the thread counters cannot
// explain, how many overlapped a GC; the most CPU time any transaction
// used; and the longest.
type outliers struct {
	slow, preempted, blocked, onCPU, unknown, gc int
	maxCPU                                       time.Duration // over every transaction
	longest                                      txnProbe
}

func (m *txnTimer) outliers() outliers {
	var o outliers
	for _, t := range m.txns {
		o.maxCPU = max(o.maxCPU, t.cpu)
		if t.wall > o.longest.wall {
			o.longest = t
		}
		if t.wall <= slowTxn {
			continue
		}
		o.slow++
		if t.gcs > 0 {
			o.gc++
		}
		switch {
		case !t.known:
			o.unknown++
		case t.cpu*2 >= t.wall:
			o.onCPU++
		case t.invol > 0:
			o.preempted++
		default:
			o.blocked++
		}
	}
	return o
}

// String sums the outliers up in a sentence.
func (o outliers) String() string {
	if o.slow == 0 {
		return fmt.Sprintf("the longest %s; none longer than %v. The most CPU time any one used: %.2f ms",
			o.longest, slowTxn, micros(o.maxCPU)/1e3)
	}
	return fmt.Sprintf("the longest %s. Of the %d longer than %v: %d mostly off CPU after an involuntary context switch (the OS gave the thread's CPU to another thread or process), %d mostly off CPU waiting in the kernel, %d mostly on CPU, %d shared their thread with other goroutines or moved between threads; %d overlapped a GC. The most CPU time any one used: %.2f ms",
		o.longest, o.slow, slowTxn, o.preempted, o.blocked, o.onCPU, o.unknown, o.gc, micros(o.maxCPU)/1e3)
}

// String says what the timer saw of t.
func (t txnProbe) String() string {
	if !t.known {
		return fmt.Sprintf("%.2f ms (the Go scheduler moved it between threads, or ran other goroutines on its thread meanwhile)", micros(t.wall)/1e3)
	}
	gc := ""
	if t.gcs > 0 {
		gc = fmt.Sprintf(", %d GC cycles ended meanwhile", t.gcs)
	}
	return fmt.Sprintf("%.2f ms, of which %.2f ms on CPU; %d involuntary and %d voluntary context switches%s",
		micros(t.wall)/1e3, micros(t.cpu)/1e3, t.invol, t.vol, gc)
}
