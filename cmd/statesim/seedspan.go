package main

import (
	"strconv"
	"strings"
)

// closed reports whether c is closed; a nil c never is.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// seedSpan is the seeds lo..hi.
type seedSpan struct{ lo, hi uint64 }

// joinSpans prints spans, in order, joining those that touch: "30..33, 35".
func joinSpans(spans []seedSpan) string {
	var out []string
	for i := 0; i < len(spans); {
		lo, hi := spans[i].lo, spans[i].hi
		for i++; i < len(spans) && spans[i].lo == hi+1; i++ {
			hi = spans[i].hi
		}
		s := strconv.FormatUint(lo, 10)
		if hi != lo {
			s += ".." + strconv.FormatUint(hi, 10)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// ranSeeds prints the seeds that ran of the sent first ones from from: all
// but those lost (sorted, each one of them).
func ranSeeds(from uint64, sent int, lost []uint64) string {
	var spans []seedSpan
	if sent > 0 {
		last := from + uint64(sent-1)
		lo, rest := from, true
		for _, s := range lost {
			if s > lo {
				spans = append(spans, seedSpan{lo, s - 1})
			}
			if s == last {
				rest = false
				break
			}
			lo = s + 1
		}
		if rest {
			spans = append(spans, seedSpan{lo, last})
		}
	}
	return joinSpans(spans)
}

// notRunSeeds prints the seeds of -seeds that did not run: those lost
// (sorted) and those never sent.
func notRunSeeds(from uint64, sent, seeds int, lost []uint64) string {
	var spans []seedSpan
	for _, s := range lost {
		spans = append(spans, seedSpan{s, s})
	}
	if sent < seeds {
		spans = append(spans, seedSpan{from + uint64(sent), from + uint64(seeds-1)})
	}
	return joinSpans(spans)
}
