package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/statekit/statekit/state"
)

// The verbs for shell scripts: the library's semantics, exit status 0, 1
// for "not found" or "not swapped", 2 for errors.

var getCommand = &command{
	name:    "get",
	args:    "FILE KEY",
	summary: "print a key's value",
	details: `
Print the live value of KEY: an integer in decimal, bytes as they are,
followed by a newline. Exit status 1 when the key is absent or expired.

get opens FILE read-only.`,
	example: `
$ statectl get app.state config
v2`,
	minArgs: 2, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		return func(a *app, pos, _ []string) (err error) {
			path, key := pos[0], pos[1]
			return withKey(path, key, func(db *state.DB) error {
				v, err := db.Get(context.Background(), key)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(append(v.Bytes(), '\n'))
				return err
			})
		}
	},
}

var ttlCommand = &command{
	name:    "ttl",
	args:    "FILE KEY [--ms]",
	summary: "print a key's time left",
	details: `
Print the time KEY has left before its deadline (29.4s), or "none" when it has
no deadline. --ms prints whole milliseconds instead, -1 for no deadline.
Exit status 1 when the key is absent or expired.

ttl opens FILE read-only.`,
	example: `
$ statectl ttl app.state rate:client-42
41.3s
$ statectl ttl app.state rate:client-42 --ms
41296`,
	minArgs: 2, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		ms := fs.Bool("ms", false, "print milliseconds, -1 for no deadline")
		return func(a *app, pos, _ []string) (err error) {
			path, key := pos[0], pos[1]
			return withKey(path, key, func(db *state.DB) error {
				left, err := db.TTL(context.Background(), key)
				if err != nil {
					return err
				}
				switch {
				case *ms && left == state.NoExpiry:
					fmt.Fprintln(a.stdout, -1)
				case *ms:
					fmt.Fprintln(a.stdout, left.Milliseconds())
				case left == state.NoExpiry:
					fmt.Fprintln(a.stdout, "none")
				default:
					fmt.Fprintln(a.stdout, dur(left))
				}
				return nil
			})
		}
	},
}

var setCommand = &command{
	name:    "set",
	args:    "FILE KEY VALUE [--int] [--ttl D]",
	summary: "store a value",
	details: `
Store VALUE under KEY, replacing its value, type and deadline. VALUE is
stored as bytes, never parsed as a number, unless --int stores it as an
integer (which incr and decr need). --ttl gives the key a deadline; without
it an old deadline is dropped.`,
	example: `
$ statectl set app.state config v1
$ statectl set app.state credits 50 --int --ttl 24h`,
	minArgs: 3, maxArgs: 3,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		asInt := fs.Bool("int", false, "store VALUE as an integer")
		var ttl ttlFlag
		fs.Var(&ttl, "ttl", "give the key a deadline `D` from now (30s, 5m, 1h)")
		return func(a *app, pos, _ []string) (err error) {
			path, key := pos[0], pos[1]
			value, err := parseValue("set", pos[2], *asInt)
			if err != nil {
				return err
			}
			set := func(db *state.DB) error { return db.Set(context.Background(), key, value, ttl.options()...) }
			if err := checkInput(path, set); err != nil {
				return err
			}
			db, err := openWrite(path)
			if err != nil {
				return err
			}
			defer closeDB(db, path, &err)
			if err := set(db); err != nil {
				return fileError(path, err)
			}
			return nil
		}
	},
}

var delCommand = &command{
	name:    "del",
	args:    "FILE KEY...",
	summary: "delete keys",
	details: `
Delete the KEYs and print how many of them were live. Exit status 1 when none
was.`,
	example: `
$ statectl del app.state config session:9
1`,
	minArgs: 2, maxArgs: -1,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		return func(a *app, pos, _ []string) (err error) {
			path := pos[0]
			var n int
			del := func(db *state.DB) (err error) {
				n, err = db.Del(context.Background(), pos[1:]...)
				return err
			}
			if err := checkInput(path, del); err != nil {
				return err
			}
			db, err := openWrite(path)
			if err != nil {
				return err
			}
			defer closeDB(db, path, &err)
			if err := del(db); err != nil {
				return fileError(path, err)
			}
			fmt.Fprintln(a.stdout, n)
			if n == 0 {
				return exit(exitNo, "")
			}
			return nil
		}
	},
}

var incrCommand = &command{
	name:    "incr",
	args:    "FILE KEY [--by N] [--ttl D]",
	summary: "add to an integer and print the result",
	details: `
Add N (1 by default) to the integer at KEY in one statement and print the
result. An absent or expired key starts from 0; --ttl applies only when incr
creates the key, so a counter's window is never stretched. A value stored as
bytes is an error, never parsed; so is a result outside int64.`,
	example: `
$ statectl incr app.state rate:client-42 --ttl 1m
1
$ statectl incr app.state rate:client-42 --by 5
6`,
	minArgs: 2, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		return incrSetup(fs, 1)
	},
}

var decrCommand = &command{
	name:    "decr",
	args:    "FILE KEY [--by N] [--ttl D]",
	summary: "subtract from an integer and print the result",
	details: `
Subtract N (1 by default) from the integer at KEY, as incr adds it, and print
the result.`,
	example: `
$ statectl decr app.state stock:sku-9
41`,
	minArgs: 2, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		return incrSetup(fs, -1)
	},
}

// incrSetup is incr (sign 1) and decr (sign -1).
func incrSetup(fs *flag.FlagSet, sign int64) func(*app, []string, []string) error {
	by := new(int64)
	*by = 1
	fs.Var(intFlag{by}, "by", "the amount `N`")
	var ttl ttlFlag
	fs.Var(&ttl, "ttl", "a deadline `D` from now if this creates the key")
	return func(a *app, pos, _ []string) (err error) {
		path, key := pos[0], pos[1]
		var n int64
		add := func(db *state.DB) (err error) {
			ctx := context.Background()
			if sign > 0 {
				n, err = db.IncrBy(ctx, key, *by, ttl.options()...)
			} else {
				n, err = db.DecrBy(ctx, key, *by, ttl.options()...)
			}
			return err
		}
		if err := checkInput(path, add); err != nil {
			return err
		}
		db, err := openWrite(path)
		if err != nil {
			return err
		}
		defer closeDB(db, path, &err)
		if err := add(db); err != nil {
			if errors.Is(err, state.ErrNotInteger) {
				// set stores its argument as bytes unless told
				// otherwise: say how to store a counter.
				err = fmt.Errorf("%w (it holds bytes: set --int stores an integer)", err)
			}
			return fileError(path, err)
		}
		fmt.Fprintln(a.stdout, n)
		return nil
	}
}

var expireCommand = &command{
	name:    "expire",
	args:    "FILE KEY --ttl D",
	summary: "set a key's deadline",
	details: `
Give the live KEY a deadline D from now. A D of zero or less deletes the key,
as Redis does. Exit status 1 when the key is absent or expired.`,
	example: `
$ statectl expire app.state session:9 --ttl 15m`,
	minArgs: 2, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		var ttl ttlFlag
		fs.Var(&ttl, "ttl", "the deadline `D` from now; 0 deletes the key")
		return func(a *app, pos, _ []string) (err error) {
			path, key := pos[0], pos[1]
			if !ttl.set {
				return usageError("expire", "--ttl is missing")
			}
			var ok bool
			expire := func(db *state.DB) (err error) {
				ok, err = db.Expire(context.Background(), key, ttl.d)
				return err
			}
			if err := checkInput(path, expire); err != nil {
				return err
			}
			db, err := openWrite(path)
			if err != nil {
				return err
			}
			defer closeDB(db, path, &err)
			if err := expire(db); err != nil {
				return fileError(path, err)
			}
			if !ok {
				return notFound(path, key)
			}
			return nil
		}
	},
}

var casCommand = &command{
	name:    "cas",
	args:    "FILE KEY OLD NEW [--int] | FILE KEY --absent NEW | FILE KEY OLD --delete",
	summary: "swap a value only if it is what you expect",
	details: `
Set KEY to NEW only if its live value is OLD, in type and content, and exit 0;
otherwise change nothing and exit 1. --absent expects no live key instead of
OLD (the new key gets no deadline); --delete deletes the key instead of
setting NEW. OLD and NEW are bytes unless --int makes them integers. A swap
keeps the key's deadline.`,
	example: `
$ statectl cas app.state config v1 v2 && echo swapped
swapped
$ statectl cas app.state config v1 v3 || echo "changed under us"
statectl: app.state: cas "config": not swapped
changed under us`,
	minArgs: 2, maxArgs: 4,
	setup: func(fs *flag.FlagSet) func(*app, []string, []string) error {
		asInt := fs.Bool("int", false, "OLD and NEW are integers")
		absent := fs.Bool("absent", false, "expect the key to be absent (no OLD)")
		del := fs.Bool("delete", false, "delete the key on a match (no NEW)")
		return func(a *app, pos, _ []string) (err error) {
			path, key := pos[0], pos[1]
			want := []string{"FILE", "KEY"}
			if !*absent {
				want = append(want, "OLD")
			}
			if !*del {
				want = append(want, "NEW")
			}
			if len(pos) != len(want) {
				n := len(pos) - 2
				return usageError("cas", "want %s with these flags, got %d %s after KEY",
					strings.Join(want, " "), n, plural(int64(n), "value", "values"))
			}
			var old, new any
			rest := pos[2:]
			if !*absent {
				if old, err = parseValue("cas", rest[0], *asInt); err != nil {
					return err
				}
				rest = rest[1:]
			}
			if !*del {
				if new, err = parseValue("cas", rest[0], *asInt); err != nil {
					return err
				}
			}
			var ok bool
			cas := func(db *state.DB) (err error) {
				ok, err = db.CAS(context.Background(), key, old, new)
				return err
			}
			if err := checkInput(path, cas); err != nil {
				return err
			}
			db, err := openWrite(path)
			if err != nil {
				return err
			}
			defer closeDB(db, path, &err)
			if err := cas(db); err != nil {
				return fileError(path, err)
			}
			if !ok {
				return exit(exitNo, "%s: cas %s: not swapped", shown(path), quote(key))
			}
			return nil
		}
	},
}

// parseValue returns s as the library takes it: bytes, or an int64 with
// asInt.
func parseValue(cmd, s string, asInt bool) (any, error) {
	if !asInt {
		return []byte(s), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, usageError(cmd, "--int: %q is not a 64-bit integer", s)
	}
	return n, nil
}

// options returns the write options for the flag: a TTL when given.
func (t *ttlFlag) options() []state.WriteOption {
	if !t.set {
		return nil
	}
	return []state.WriteOption{state.TTL(t.d)}
}
