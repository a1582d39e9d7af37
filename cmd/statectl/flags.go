package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// errHelp is returned by parseArgs for -h, -help or --help alone.
var errHelp = errors.New("help requested")

// helpWithArgsError is returned by parseArgs for -h, -help or --help among
// positional arguments: most likely a value spelled like the flag, which
// must not print help and succeed having done nothing.
type helpWithArgsError struct{ arg string }

func (e *helpWithArgsError) Error() string {
	return fmt.Sprintf("%q is taken as the flag asking for help, so nothing was done; "+
		"to pass it as a value, put -- before the arguments", e.arg)
}

// parsed is a command line split into positional arguments and, after a
// "--", the arguments that follow it.
type parsed struct {
	pos      []string
	rest     []string
	dashDash bool
}

// parseArgs sets the flags of fs from args and returns the other arguments.
// Unlike flag.Parse it takes flags anywhere (statectl dump FILE --json),
// spelled -name or --name, with "=value" or the value in the next
// argument; a negative number is an argument, not a flag; everything after
// "--" is left alone. -h, -help or --help asks for help (errHelp), unless
// arguments come with it.
func parseArgs(fs *flag.FlagSet, args []string) (parsed, error) {
	var p parsed
	help := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.rest, p.dashDash = args[i+1:], true
			break
		}
		if !looksLikeFlag(a) {
			p.pos = append(p.pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "h" || name == "help" {
			if help == "" {
				help = a
			}
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			return p, fmt.Errorf("unknown flag %q; to pass it as a value, put -- before the arguments", a)
		}
		isBool := false
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			isBool = true
		}
		if !hasValue {
			if isBool {
				value = "true"
			} else {
				i++
				if i == len(args) {
					return p, fmt.Errorf("flag --%s needs a value", name)
				}
				value = args[i]
			}
		}
		if isBool {
			if _, err := strconv.ParseBool(value); err != nil {
				return p, fmt.Errorf("invalid value %q for --%s: not true or false", value, name)
			}
		}
		if err := fs.Set(name, value); err != nil {
			return p, fmt.Errorf("invalid value %q for --%s: %v", value, name, err)
		}
	}
	switch {
	case help == "":
		return p, nil
	case len(p.pos) > 0 || len(p.rest) > 0:
		return p, &helpWithArgsError{arg: help}
	}
	return p, errHelp
}

// looksLikeFlag reports whether a is a flag rather than an argument: it
// starts with a dash, is not a lone "-", and is not a number.
func looksLikeFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a, 64)
	return err != nil
}

// ttlFlag is an optional duration flag: set tells whether it was given.
type ttlFlag struct {
	d   time.Duration
	set bool
}

func (t *ttlFlag) String() string {
	if !t.set {
		return ""
	}
	return t.d.String()
}

func (t *ttlFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	t.d, t.set = d, true
	return nil
}

// durationFlag is a duration flag whose errors say what is wrong with the
// value (the flag package's own says only "parse error").
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// intFlag is an int64 flag whose errors say what is wrong with the value.
type intFlag struct{ n *int64 }

func (f intFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.FormatInt(*f.n, 10)
}

func (f intFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a 64-bit integer")
	}
	*f.n = n
	return nil
}
