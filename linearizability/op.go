package linearizability

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/statekit/statekit/model"
)

// Event says what an Op records: a verb call, or an event of the machine.
type Event uint8

// The events.
const (
	// Verb is a verb a client called: Input and Output say which and what it
	// answered.
	Verb Event = iota
	// PowerLoss is the machine losing power at Op.Call (== Op.Return): every
	// unsynced write may be lost. Recorders give operations after the reboot
	// call times strictly after it.
	PowerLoss
	// Durable is a FULL commit the history does not otherwise show (a
	// checkpoint, a write on a key not recorded) that happened within
	// [Op.Call, Op.Return]: every commit before it is durable.
	Durable
	eventEnd
)

var eventNames = [...]string{Verb: "verb", PowerLoss: "power_loss", Durable: "durable"}

// String returns the event's name, such as "power_loss".
func (e Event) String() string {
	if e < eventEnd {
		return eventNames[e]
	}
	return "event(" + strconv.Itoa(int(e)) + ")"
}

// MarshalText encodes e as its name; it returns an error for an unknown
// Event.
func (e Event) MarshalText() ([]byte, error) {
	if e >= eventEnd {
		return nil, fmt.Errorf("linearizability: cannot encode %s", e)
	}
	return []byte(eventNames[e]), nil
}

// UnmarshalText decodes a name written by MarshalText; it returns an error
// for an unknown name.
func (e *Event) UnmarshalText(b []byte) error {
	for i := Verb; i < eventEnd; i++ {
		if eventNames[i] == string(b) {
			*e = i
			return nil
		}
	}
	return fmt.Errorf("linearizability: unknown event %q", b)
}

// Durability is how a write committed.
type Durability uint8

// The durabilities.
const (
	// Normal is synchronous=NORMAL: a power loss may roll the commit back
	// (reads use it too; it is the zero value).
	Normal Durability = iota
	// Full is synchronous=FULL: once committed the write, and every commit
	// before it, survives a power loss.
	Full
)

// String returns "normal" or "full".
func (d Durability) String() string {
	if d == Full {
		return "full"
	}
	return "normal"
}

// MarshalText encodes d as its name.
func (d Durability) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes "normal" or "full"; it returns an error otherwise.
func (d *Durability) UnmarshalText(b []byte) error {
	switch string(b) {
	case "normal":
		*d = Normal
	case "full":
		*d = Full
	default:
		return fmt.Errorf("linearizability: unknown durability %q", b)
	}
	return nil
}

// Op is one recorded operation or event. Call and Return are timestamps from
// one clock every recorder shares (virtual time, an event counter, or
// CLOCK_MONOTONIC across processes); intervals are closed, so two operations
// whose intervals touch are concurrent, and no call or known return may fall
// at a PowerLoss's instant (Validate). Input.NowMillis is the engine time
// the call used, in unix milliseconds; it decides expiry, independently of
// Call and Return.
//
// Client identifies the caller; Seq, when not 0, numbers its operations so a
// later line of a journal can replace an earlier one (see Decode).
//
// Unknown marks an outcome a crash or power loss hid: Output is ignored, and
// the call may or may not have taken effect. Its Return, when greater than
// Call, is a time by which the call had certainly ended (after its process
// was seen dead); otherwise the call is open until the first PowerLoss after
// it, or until after every other event. Give the bound when you have it:
// open calls make the search much slower.
//
// NowLatest, for an Unknown op whose engine time is not known exactly (a
// store that reports the time a call ran at with its answer, whose answer
// was lost), is the latest time it may have run at; Input.NowMillis is then
// the earliest. The check lets the op take effect at any millisecond
// between, and tells the times apart only as later answers do: the rows
// that differ only in a deadline set from the time are kept as one run of
// deadlines, so a window of seconds costs about what one time does (a call
// that sets two deadlines of a group from its one time makes a row per
// time).
// Zero, or less than Input.NowMillis: the op ran at Input.NowMillis. It is
// read only on an Unknown op. Like every engine time, it is unix
// milliseconds.
//
// Handle and Claimed, both optional, tie the order the check chooses to
// the order in which one store handle ran its calls. Handle names the
// handle (any id other than 0, one per open of the store); Claimed is a
// time on the Call/Return clock at which the handle had claimed the op's
// engine time (Input.NowMillis) and not yet applied it. Set them only on
// a call that ran in one hold of the handle's lock, claiming its time
// under it, as the file engine's verbs do (not a listing or a Sweep, which
// run in several). The check then takes the call as taking effect at or
// after Claimed, and before the Claimed of every call of its handle with a
// later engine time (handle.go): a handle that claimed a time and used it
// after a later one was used would pass without them.
//
// Durability says how a write committed; a Full write is a durable point
// when it committed.
//
// Recording Flush: its per-key answers are not checked (the engine does not
// report them); record a Flush that returned an error as Unknown.
type Op struct {
	Client     int          `json:"client"`
	Seq        int64        `json:"seq,omitempty"`
	Event      Event        `json:"event,omitempty"`
	Input      model.Input  `json:"input"`
	Output     model.Output `json:"output"`
	Call       int64        `json:"call"`
	Return     int64        `json:"return"`
	Unknown    bool         `json:"unknown,omitempty"`
	NowLatest  int64        `json:"now_latest,omitempty"`
	Durability Durability   `json:"durability,omitempty"`
	Handle     int          `json:"handle,omitempty"`
	Claimed    int64        `json:"claimed,omitempty"`
	// Survived, on a PowerLoss event only, says the processes lived
	// through the loss: a file system that dropped a failed sync's writes
	// took back what was not durable, as a power loss would, but nothing
	// stopped. A call in flight at it may then take effect after it, as a
	// call in flight at a real power loss may not: an Unknown op is open
	// past a survived loss, until the first real one after its call.
	Survived bool `json:"survived,omitempty"`
	// Recovered, on a PowerLoss event only, is what the recorder read of
	// the file once it recovered after the loss, before any later call:
	// the check holds each partition it names to its row there, which must
	// be one the power loss may roll back to (for a key or lease no call
	// touched, only absent). nil, or a partition it does not name: any of
	// those rows will do.
	Recovered *Recovery `json:"recovered,omitempty"`
}

// Recovery is the rows of some keys and leases as a file recovered after a
// power loss. Name only keys and leases whose every change is in the
// history: the check holds the history to these rows.
type Recovery struct {
	Keys   []string    `json:"keys"`   // the keys read
	Leases []string    `json:"leases"` // the leases read
	State  model.State `json:"state"`  // their rows; one read and missing here was absent
}

// names reports whether r read p's row: for a group, the row of each of
// its keys, those the history has.
func (r *Recovery) names(p partition, groupKeys []string) bool {
	switch {
	case p.lease:
		return slices.Contains(r.Leases, p.key)
	case p.group:
		for _, k := range groupKeys {
			if !slices.Contains(r.Keys, k) {
				return false
			}
		}
		return true
	}
	return slices.Contains(r.Keys, p.key)
}

// PowerLossAt returns the event of a power loss at time at.
func PowerLossAt(at int64) Op { return Op{Event: PowerLoss, Call: at, Return: at} }

// SurvivedLossAt returns the event of a loss the processes lived through
// (Op.Survived) at time at.
func SurvivedLossAt(at int64) Op {
	return Op{Event: PowerLoss, Call: at, Return: at, Survived: true}
}

// DurableWithin returns the event of a FULL commit within [call, ret].
func DurableWithin(call, ret int64) Op { return Op{Event: Durable, Call: call, Return: ret} }

// String describes the op readably, such as
// `c2 [10,14] incrby("a", +1) @1000 -> 6 full`.
func (op Op) String() string {
	switch op.Event {
	case PowerLoss:
		if op.Survived {
			return fmt.Sprintf("power loss at %d, survived", op.Call)
		}
		return fmt.Sprintf("power loss at %d", op.Call)
	case Durable:
		return fmt.Sprintf("durable point within [%d,%d]", op.Call, op.Return)
	case Verb:
	default:
		return op.Event.String()
	}
	var s string
	if op.Unknown {
		s = fmt.Sprintf("c%d [%d,?] %s -> unknown", op.Client, op.Call, op.Input)
	} else {
		s = fmt.Sprintf("c%d [%d,%d] %s", op.Client, op.Call, op.Return, model.Describe(op.Input, op.Output))
	}
	if op.Durability == Full {
		s += " full"
	}
	return s
}

// Validate reports the first malformed op of history: an unknown event or
// verb, a PowerLoss whose Return is not its Call, Survived on another
// event or with Recovered rows, a known outcome that returns before its call or at or after a
// PowerLoss it started before (a survived one aside), a verb called at a PowerLoss's instant, a
// Claimed without a Handle or outside the call (validClaim), or an Update whose sub-outputs do not fit its
// sub-inputs (one each when it answered ErrNone or ErrAborted; up to the one
// that failed otherwise, a sub-input refused as invalid included: only an
// Update the spec refuses before running any, model.Refuses, answers none).
func Validate(history []Op) error {
	var powerLosses []int64 // the real ones: a call cannot run on past them
	for _, op := range history {
		if op.Event == PowerLoss && !op.Survived {
			powerLosses = append(powerLosses, op.Call)
		}
	}
	slices.Sort(powerLosses)
	for i, op := range history {
		if op.Recovered != nil && op.Event != PowerLoss {
			return fmt.Errorf("op %d (%s): recovered rows on an op that is not a power loss", i, op)
		}
		if (op.Handle != 0 || op.Claimed != 0) && op.Event != Verb {
			return fmt.Errorf("op %d (%s): a handle or a claim on an event that is no call", i, op)
		}
		if op.Survived && op.Event != PowerLoss {
			return fmt.Errorf("op %d (%s): survived on an op that is not a power loss", i, op)
		}
		if op.Survived && op.Recovered != nil {
			return fmt.Errorf("op %d (%s): recovered rows on a power loss the processes survived: nothing recovered", i, op)
		}
		switch op.Event {
		case PowerLoss, Durable:
			if op.Event == PowerLoss && op.Return != op.Call {
				return fmt.Errorf("op %d (%s) returns at %d: a power loss is an instant, its return its call", i, op, op.Return)
			}
			if op.Return < op.Call {
				return fmt.Errorf("op %d (%s): returns before its call", i, op)
			}
			continue
		case Verb:
		default:
			return fmt.Errorf("op %d: unknown event %d", i, op.Event)
		}
		if err := validInput(op.Input, 0); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, op, err)
		}
		// Intervals are closed: a call or return at a power loss's
		// instant would be concurrent with it, and could be judged on
		// the wrong side of it (a commit taken back by a loss that came
		// before its call, an answer read after one that came after it).
		if _, at := slices.BinarySearch(powerLosses, op.Call); at {
			return fmt.Errorf("op %d (%s): called at the instant of the power loss at %d", i, op, op.Call)
		}
		if err := validClaim(op, powerLosses); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, op, err)
		}
		if op.Unknown {
			continue
		}
		if op.Return < op.Call {
			return fmt.Errorf("op %d (%s): returns before its call", i, op)
		}
		if j, _ := slices.BinarySearch(powerLosses, op.Call+1); j < len(powerLosses) && powerLosses[j] <= op.Return {
			return fmt.Errorf("op %d (%s): returns at or after the power loss at %d (record it as unknown)", i, op, powerLosses[j])
		}
		if op.Input.Kind != model.Update || op.Output.Err == model.ErrInvalid && model.Refuses(op.Input) {
			continue // refused before any sub-input ran: it answers none
		}
		subs, ops := len(op.Output.Sub), len(op.Input.Ops)
		switch op.Output.Err {
		case model.ErrNone, model.ErrAborted:
			if subs != ops {
				return fmt.Errorf("op %d (%s): %d sub-outputs for %d sub-inputs", i, op, subs, ops)
			}
		default:
			if subs == 0 || subs > ops {
				return fmt.Errorf("op %d (%s): %d sub-outputs for %d sub-inputs, failing at one of them", i, op, subs, ops)
			}
		}
	}
	return nil
}

// validInput checks the verbs of in and its sub-inputs.
func validInput(in model.Input, depth int) error {
	if _, err := in.Kind.MarshalText(); err != nil || in.Kind == 0 {
		return fmt.Errorf("unknown verb %s", in.Kind)
	}
	if depth > 1 {
		return fmt.Errorf("%s nested too deep", in.Kind)
	}
	for _, sub := range in.Ops {
		if err := validInput(sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}
