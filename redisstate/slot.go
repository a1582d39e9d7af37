package redisstate

import (
	"errors"
	"strings"

	"github.com/statekit/statekit/state"
)

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// slot returns the Redis Cluster hash slot of a Redis key: CRC16 (XMODEM)
// of the key, or of its hash tag (the text between the first '{' and the
// next '}' when that is not empty), modulo 16384.
func slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}

// bySlot splits keys (statekit keys, not Redis keys) into groups that
// share a cluster slot, in the order each slot is first met; on one server
// it returns them as one group.
func (s *store) bySlot(keys []string) [][]string {
	if len(keys) == 0 {
		return nil
	}
	if s.cluster == nil {
		return [][]string{keys}
	}
	index := map[int]int{}
	var groups [][]string
	for _, k := range keys {
		sl := slot(s.keyOf(k))
		i, ok := index[sl]
		if !ok {
			i = len(groups)
			index[sl] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], k)
	}
	return groups
}

func isInvalid(err error) bool     { return errors.Is(err, state.ErrInvalidArgument) }
func isUnavailable(err error) bool { return errors.Is(err, state.ErrUnavailable) }
