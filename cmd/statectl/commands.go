package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one statectl subcommand.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string // one line for statectl help
	details string // what it does, for --help
	example string // a shell session
	// minArgs and maxArgs bound the positional arguments, FILE included;
	// maxArgs < 0 means no bound.
	minArgs, maxArgs int
	// takesCommand says the command runs a program given after "--".
	takesCommand bool
	// setup defines the command's flags on fs and returns the function
	// that runs it once they are parsed. cmdArgs is what followed "--".
	setup func(fs *flag.FlagSet) func(a *app, pos, cmdArgs []string) error
}

// commands lists every command in the order help shows them.
var commands = []*command{
	dumpCommand, leasesCommand, infoCommand, checkCommand,
	getCommand, ttlCommand,
	setCommand, delCommand, incrCommand, decrCommand, expireCommand, casCommand,
	sweepCommand, runCommand,
}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	i := slices.IndexFunc(commands, func(c *command) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return commands[i]
}

// dispatch runs the command args name.
func (a *app) dispatch(args []string) error {
	a.hidePasswords(args)
	if len(args) == 0 {
		a.help(a.stderr)
		return exit(exitError, "a command is missing")
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 2 {
			return exit(exitError, "help takes one command, not %q too (see statectl help)", args[2])
		}
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				c.usage(a.stdout)
				return nil
			}
			return exit(exitError, "unknown command %q (see statectl help)", args[1])
		}
		a.help(a.stdout)
		return nil
	}
	c := lookup(name)
	if c == nil {
		return exit(exitError, "unknown command %q (see statectl help)", name)
	}
	return c.run(a, args[1:])
}

// run parses args and runs the command.
func (c *command) run(a *app, args []string) error {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fn := c.setup(fs)
	if c.takesCommand {
		// Everything after the first "--" is CMD's, flags included.
		if i := slices.Index(args, "--"); i >= 0 {
			p, err := parseArgs(fs, args[:i])
			if err != nil {
				return c.parseError(a, err)
			}
			return c.call(a, fn, p.pos, args[i+1:])
		}
	}
	p, err := parseArgs(fs, args)
	if err != nil {
		return c.parseError(a, err)
	}
	pos := append(p.pos, p.rest...)
	if c.takesCommand {
		return usageError(c.name, "the command to run is missing after --")
	}
	return c.call(a, fn, pos, nil)
}

func (c *command) call(a *app, fn func(*app, []string, []string) error, pos, cmdArgs []string) error {
	switch {
	case len(pos) == 0:
		return usageError(c.name, "FILE is missing")
	case len(pos) < c.minArgs:
		return usageError(c.name, "want %s", c.args)
	case c.maxArgs >= 0 && len(pos) > c.maxArgs:
		return usageError(c.name, "unexpected argument %q", pos[c.maxArgs])
	}
	return fn(a, pos, cmdArgs)
}

func (c *command) parseError(a *app, err error) error {
	if errors.Is(err, errHelp) {
		c.usage(a.stdout)
		return nil
	}
	return usageError(c.name, "%v", err)
}

// usage prints the command's help: synopsis, details, flags and example.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: statectl %s %s\n\n%s\n", c.name, c.args, strings.TrimSpace(c.details))
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if name != "" {
			left += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			use += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		flags = append(flags, fmt.Sprintf("  %-18s %s", left, use))
	})
	if len(flags) > 0 {
		fmt.Fprintf(w, "\nflags:\n%s\n", strings.Join(flags, "\n"))
	}
	fmt.Fprintf(w, "\nexample:\n")
	for _, line := range strings.Split(strings.TrimSpace(c.example), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

// help prints the list of commands.
func (a *app) help(w io.Writer) {
	fmt.Fprint(w, `statectl sees and steers a statekit state file from the shell, and runs one
copy of a job at a time under a lease.

usage: statectl COMMAND FILE [ARGUMENTS] [FLAGS]

Flags may come anywhere among the arguments. An argument that starts with a
dash is a flag, unless it is a number; after "--" nothing is: to store a value
like "-h" or "-5 apples", write statectl set -- FILE KEY -h. (run takes its
flags before "--" and the command to run after it.)

`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
dump, leases, info, check, get and ttl open FILE read-only: they never create,
change or advance anything in it or beside it (a FILE no process has open, with
no FILE-wal or FILE-journal, is read from a private copy in $TMPDIR, which needs
room for all of FILE) and are safe beside a running application. The other
commands create FILE when it is missing.

FILE may instead be the URL of a store on a Redis server, as a program's
state.Open takes it: redis://[user:password@]host:port/db?prefix=app:
(also rediss:// and redis+cluster://). Every command works on it: the read
commands only read, info shows the counts, check the stored encoding, and
sweep deletes nothing, since Redis expires keys itself (so dump --all finds
no expired keys). A server that cannot be reached is an error (exit 2),
which run --wait does not wait out. Messages show the URL without its
password.

Exit status: 0 on success; 1 for not found, not swapped, nothing deleted and
check findings; 2 for errors; 75 when run finds the lease held by another
owner; 76 when run's lease was lost while its command ran. run otherwise exits
with its command's status.

Run "statectl COMMAND --help" for a command's flags and an example.
`)
}
