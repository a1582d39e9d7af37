package sim

import "slices"

// Shrink looks for a smaller run that still fails check: fewer operations
// (a shorter run of the same seed replays the same prefix), then each fault
// kind turned off in turn, then fewer operations again. It makes at most
// budget runs and returns the smallest failing Config it found with its
// Report, or cfg and nil when no smaller run failed. Shrink returns an error
// only for a Config that fails Validate.
func Shrink(cfg Config, check string, budget int) (Config, *Report, error) {
	if err := cfg.Validate(); err != nil {
		return cfg, nil, err
	}
	best, bestReport := cfg, (*Report)(nil)
	runs := 0
	try := func(c Config) bool {
		if runs >= budget {
			return false
		}
		runs++
		r, err := Run(c)
		if err != nil || !slices.Contains(r.Checks(), check) {
			return false
		}
		best, bestReport = c, r
		return true
	}
	fewerOps := func() {
		lo, hi := 1, best.Ops
		for lo < hi && runs < budget {
			mid := lo + (hi-lo)/2
			c := best
			c.Ops = mid
			if try(c) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
	}
	fewerOps()
	for _, r := range best.Rates.list() {
		c := best
		for _, q := range c.Rates.list() {
			if q.name == r.name && *q.p != 0 {
				*q.p = 0
				try(c)
			}
		}
	}
	fewerOps()
	return best, bestReport, nil
}
