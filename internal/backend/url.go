package backend

import (
	"regexp"
	"strings"
)

// RedactURL returns a backend's URL with its password replaced, for errors
// and for anything else a program prints (a command line to run again, a
// report). It works on the text, so a URL that does not parse is redacted
// too, and so is a lone user name, which redis-cli reads as the password
// (redis://secret@host), a password holding a '/', '?' or '#' a URL must
// escape (UserInfoAt), and a password= query parameter's value. Text
// without "://" is returned as it is.
func RedactURL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	if at := UserInfoAt(rest); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		info := "xxxxx"
		if hasPass {
			info = user + ":xxxxx"
		}
		rest = info + rest[at:]
	}
	return raw[:i+3] + passwordParam.ReplaceAllString(rest, "${1}xxxxx")
}

// passwordParam matches a query parameter that names a password, and its
// value.
var passwordParam = regexp.MustCompile(`(?i)([?&][a-z_]*password=)[^&#]*`)

// UnescapedUserInfo reports whether raw's user name or password holds a
// '/', '?' or '#' a URL must percent-encode: url.Parse would end the
// authority inside the password and put the rest of it in the path, the
// query or the fragment, and so in its error messages. A backend refuses
// such a URL before it parses it.
func UnescapedUserInfo(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return false
	}
	end := strings.IndexAny(rest, "/?#")
	return end >= 0 && UserInfoAt(rest) > end
}

// UserInfoAt returns the index in rest, a URL after its "://", of the '@'
// that ends its user info, or -1 for none: url.Parse's (the last '@'
// before the first '/', '?' or '#'), or else, for a password holding one
// of those unescaped, the last '@' after them that is not in a query
// parameter's value (client_name=a@b). RedactURL finds the user info with
// it, and a backend that refuses such a password finds it the same way.
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
