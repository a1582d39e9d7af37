package backend

import "strings"

// UserInfoAt returns the index in rest, a URL after its "://", of the '@'
// that ends its user info, or -1 for none: url.Parse's (the last '@'
// before the first '/', '?' or '#'), or else, for a password holding one
// of those unescaped, the last '@' after them that is not in a query
// parameter's value (client_name=a@b). state redacts a backend's URL with
// it, and a backend that refuses such a password finds it the same way,
// so that what one refuses the other never prints.
func UserInfoAt(rest string) int {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		return strings.LastIndex(rest, "@")
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return at
	}
	at := -1
	for i := end; i < len(rest); i++ {
		if rest[i] == '@' && !inQueryValue(rest[end:i]) {
			at = i
		}
	}
	return at
}

// inQueryValue reports whether the text before an '@' (from the end of
// the authority) ends inside a query parameter's value: after a '?', in
// a name=value pair, with no '/' or '#' since the '?'.
func inQueryValue(before string) bool {
	q := strings.LastIndex(before, "?")
	if q < 0 {
		return false
	}
	seg := before[q+1:]
	if strings.ContainsAny(seg, "/#") {
		return false
	}
	if amp := strings.LastIndex(seg, "&"); amp >= 0 {
		seg = seg[amp+1:]
	}
	return strings.Contains(seg, "=")
}
