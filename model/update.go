package model

// update runs in.Ops in order on a copy of *s and keeps the copy only when
// none aborted and in.Abort is false.
func update(s *State, in Input, nowMillis int64) Output {
	work := s.Clone()
	out := Output{Sub: make([]Output, 0, len(in.Ops))}
	for _, op := range in.Ops {
		sub := apply(&work, op, nowMillis)
		out.Sub = append(out.Sub, sub)
		if sub.Err.aborts() {
			out.Err = sub.Err
			return out
		}
	}
	if in.Abort {
		out.Err = ErrAborted
		return out
	}
	*s = work
	return out
}

// flush applies each IncrBy of in.Ops on its own: one that fails changes
// nothing and the rest still apply.
func flush(s *State, in Input, nowMillis int64) Output {
	out := Output{Sub: make([]Output, 0, len(in.Ops))}
	for _, op := range in.Ops {
		out.Sub = append(out.Sub, apply(s, op, nowMillis))
	}
	return out
}
