package model

func lease(s *State, name, owner string, ttlMillis, nowMillis int64) Output {
	row, ok := s.Leases[name]
	extended := false
	switch {
	case !ok:
		row = LeaseRow{Token: 1}
	case !row.Live(nowMillis):
		row.Token++
	case row.Owner != owner:
		return Output{Err: ErrLeaseHeld, Owner: row.Owner, ExpiresAt: row.ExpiresAt}
	default:
		extended = true
	}
	row.Owner = owner
	row.ExpiresAt = nowMillis + ttlMillis
	s.Leases[name] = row
	return Output{Token: row.Token, ExpiresAt: row.ExpiresAt, OK: extended}
}

// held returns the lease row when owner holds it with token at now.
func held(s State, name, owner string, token, nowMillis int64) (LeaseRow, bool) {
	row, ok := s.Leases[name]
	return row, ok && row.Live(nowMillis) && row.Token == token && row.Owner == owner
}

func renew(s *State, name, owner string, token, ttlMillis, nowMillis int64) Output {
	row, ok := held(*s, name, owner, token, nowMillis)
	if !ok {
		return Output{Err: ErrLeaseLost}
	}
	row.ExpiresAt = nowMillis + ttlMillis
	s.Leases[name] = row
	return Output{ExpiresAt: row.ExpiresAt}
}

func release(s *State, name, owner string, token, nowMillis int64) Output {
	row, ok := held(*s, name, owner, token, nowMillis)
	if !ok {
		return Output{Err: ErrLeaseLost}
	}
	row.ExpiresAt = 0
	s.Leases[name] = row
	return Output{}
}
