package redisstate

import (
	"fmt"
	"strconv"

	"github.com/statekit/statekit/state"
)

// Tags that start every stored value.
const (
	tagInt   = "i:"
	tagBytes = "b:"
)

// encode returns the Redis string that stores v.
func encode(v state.Value) string {
	if n, ok := v.Int(); ok {
		return tagInt + strconv.FormatInt(n, 10)
	}
	return tagBytes + string(v.Bytes())
}

// decode reads a stored Redis string back; a string without a valid tag
// is ErrCorrupt.
func decode(s string) (state.Value, error) {
	if len(s) < 2 {
		return state.Value{}, fmt.Errorf("%w: stored value %q has no type tag (i: or b:)", state.ErrCorrupt, s)
	}
	switch s[:2] {
	case tagBytes:
		return state.BytesValue([]byte(s[2:])), nil
	case tagInt:
		n, err := strconv.ParseInt(s[2:], 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != s[2:] {
			return state.Value{}, fmt.Errorf("%w: stored integer %q is not a canonical int64", state.ErrCorrupt, clip(s))
		}
		return state.IntValue(n), nil
	}
	return state.Value{}, fmt.Errorf("%w: stored value %q has no type tag (i: or b:)", state.ErrCorrupt, clip(s))
}

// clip shortens a stored string for an error message.
func clip(s string) string {
	const max = 40
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// Redis keys of the store: a key K at prefix+"k:"+K, a lease name N at
// prefix+"lease:"+N.
func (s *store) keyOf(k string) string   { return s.cfg.prefix + "k:" + k }
func (s *store) leaseOf(n string) string { return s.cfg.prefix + "lease:" + n }
