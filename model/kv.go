package model

// liveEntry returns key's row and whether it is live at now.
func liveEntry(s State, key string, nowMillis int64) (Entry, bool) {
	e, ok := s.KV[key]
	return e, ok && e.Live(nowMillis)
}

func get(s State, key string, nowMillis int64) Output {
	e, live := liveEntry(s, key, nowMillis)
	if !live {
		return Output{Err: ErrNotFound}
	}
	return Output{Value: e.Value}
}

func set(s *State, key string, v Value, ttlMillis, nowMillis int64) Output {
	s.KV[key] = Entry{Value: v, ExpiresAt: deadline(ttlMillis, nowMillis)}
	return Output{}
}

func del(s *State, keys []string, nowMillis int64) Output {
	n := 0
	for _, k := range keys {
		if _, live := liveEntry(*s, k, nowMillis); live {
			n++
		}
		delete(s.KV, k) // a repeated key is gone by its second mention
	}
	return Output{N: n}
}

func incrBy(s *State, key string, delta, ttlMillis, nowMillis int64) Output {
	e, live := liveEntry(*s, key, nowMillis)
	if !live {
		s.KV[key] = Entry{Value: Int(delta), ExpiresAt: deadline(ttlMillis, nowMillis)}
		return Output{Int: delta}
	}
	if !e.Value.IsInt {
		return Output{Err: ErrNotInteger}
	}
	if addOverflows(e.Value.Int, delta) {
		return Output{Err: ErrOverflow}
	}
	e.Value.Int += delta
	s.KV[key] = e
	return Output{Int: e.Value.Int}
}

func cas(s *State, key string, expected, newValue *Value, ttlMillis, nowMillis int64) Output {
	e, live := liveEntry(*s, key, nowMillis)
	match := (expected == nil && !live) || (expected != nil && live && e.Value == *expected)
	if !match {
		return Output{}
	}
	var deadline int64 // a created key has none
	if live {
		deadline = e.ExpiresAt // a swap keeps it
	}
	if ttlMillis > 0 {
		deadline = nowMillis + ttlMillis
	}
	switch {
	case newValue == nil && live:
		delete(s.KV, key)
	case newValue == nil:
		// Expected and New both nil: a check that the key is absent. An
		// expired row stays for the sweep, as in the engine.
	default:
		s.KV[key] = Entry{Value: *newValue, ExpiresAt: deadline}
	}
	return Output{OK: true}
}

func expire(s *State, key string, ttlMillis, nowMillis int64) Output {
	e, live := liveEntry(*s, key, nowMillis)
	if ttlMillis <= 0 {
		delete(s.KV, key)
		return Output{OK: live}
	}
	if !live {
		return Output{}
	}
	e.ExpiresAt = nowMillis + ttlMillis
	s.KV[key] = e
	return Output{OK: true}
}

func ttl(s State, key string, nowMillis int64) Output {
	e, live := liveEntry(s, key, nowMillis)
	switch {
	case !live:
		return Output{Err: ErrNotFound}
	case e.ExpiresAt == 0:
		return Output{TTLMillis: NoExpiry}
	}
	return Output{TTLMillis: e.ExpiresAt - nowMillis}
}

func sweep(s *State, nowMillis int64) Output {
	n := 0
	for _, k := range sortedKeys(s.KV) {
		if !s.KV[k].Live(nowMillis) {
			delete(s.KV, k)
			n++
		}
	}
	return Output{N: n}
}
