package state

// bugAnswerGrants is the planted bug GroupedGrantEarly: it answers the lease
// grants of a group with their results after their statements ran, before
// the group's COMMIT (and so its FULL sync). A caller may then hold, and
// use, a token that a crash or power loss takes back, and that is granted
// again. (The grants are answered again once the group commits, to no
// one.)
func bugAnswerGrants(ops []*pending, errs []error) {
	for i, o := range ops {
		if o.full {
			o.finish(errs[i])
		}
	}
}
