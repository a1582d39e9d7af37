package redisstate

import (
	"fmt"
	"strconv"
)

// maxDeadlineDigits is the most digits a lease hash's expires field may
// have: the scripts compare it with the server's time as a Lua double,
// exact to 15 digits (the year 33658 in ms), far past any deadline a grant
// writes.
const maxDeadlineDigits = 15

// leaseHash reads a lease hash's owner, token and expires fields as HMGET
// returned them (nil for a missing field), by the rules the scripts read
// one (lease_fields in scripts/lib.lua): a non-empty owner, a token that is
// a decimal integer of at least 1 as strconv.FormatInt writes it, and a
// deadline of 1 to 15 decimal digits (ms since the epoch; 0 once
// released). bad says what is wrong with a damaged hash, "" for a sound
// one. A hash with no field at all is for the caller to tell apart.
func leaseHash(owner, token, expires any) (o string, tok, at int64, bad string) {
	o, _ = owner.(string)
	ts, _ := token.(string)
	es, _ := expires.(string)
	tok, terr := strconv.ParseInt(ts, 10, 64)
	switch {
	case o == "":
		return "", 0, 0, "owner is missing or empty"
	case terr != nil || strconv.FormatInt(tok, 10) != ts:
		return "", 0, 0, fmt.Sprintf("token %q is not an integer", ts)
	case tok < 1:
		return "", 0, 0, fmt.Sprintf("token %d is less than 1", tok)
	case !deadlineDigits(es):
		return "", 0, 0, fmt.Sprintf("expires %q is not a time in ms", es)
	}
	at, _ = strconv.ParseInt(es, 10, 64) // at most 15 digits: it fits
	return o, tok, at, ""
}

// deadlineDigits reports whether s is 1 to maxDeadlineDigits decimal
// digits, as deadline_value in scripts/lib.lua accepts.
func deadlineDigits(s string) bool {
	if s == "" || len(s) > maxDeadlineDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
