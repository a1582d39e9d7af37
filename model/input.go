package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind names a verb.
type Kind uint8

// The verbs. The zero Kind is invalid and Step answers it with ErrInvalid.
const (
	// Get reads Key.
	Get Kind = iota + 1
	// Set writes Value to Key, with TTLMillis if > 0.
	Set
	// Del deletes Keys.
	Del
	// IncrBy adds Delta to Key, creating it with TTLMillis if > 0.
	IncrBy
	// CAS swaps Key from Expected to New.
	CAS
	// Expire sets Key's deadline to now+TTLMillis, or deletes it if <= 0.
	Expire
	// TTL reads Key's time left.
	TTL
	// Lease grants the lease named Key to Owner for TTLMillis.
	Lease
	// Renew extends the lease named Key held by Owner with Token.
	Renew
	// Release frees the lease named Key held by Owner with Token.
	Release
	// Sweep deletes every expired key row.
	Sweep
	// Update runs Ops as one transaction.
	Update
	// Flush applies the IncrBy Ops of a buffered-increment flush.
	Flush
	// Scan lists the key rows whose key starts with Key, live ones only
	// unless All.
	Scan
	// Leases lists the lease rows whose name starts with Key, held ones
	// only unless All.
	Leases
	kindEnd
)

var kindNames = [...]string{
	Get: "get", Set: "set", Del: "del", IncrBy: "incrby", CAS: "cas", Expire: "expire", TTL: "ttl",
	Lease: "lease", Renew: "renew", Release: "release", Sweep: "sweep", Update: "update", Flush: "flush",
	Scan: "scan", Leases: "leases",
}

// String returns the verb's lower-case name, such as "incrby", or
// "kind(N)" for an unknown Kind.
func (k Kind) String() string {
	if k > 0 && k < kindEnd {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes k as its name, and the zero Kind as "". It returns
// an error for any other unknown Kind.
func (k Kind) MarshalText() ([]byte, error) {
	if k >= kindEnd {
		return nil, fmt.Errorf("model: cannot encode %s", k)
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText decodes a name written by MarshalText; it returns an error
// for an unknown name.
func (k *Kind) UnmarshalText(b []byte) error {
	for i := Kind(0); i < kindEnd; i++ {
		if kindNames[i] == string(b) {
			*k = i
			return nil
		}
	}
	return fmt.Errorf("model: unknown kind %q", b)
}

// IsLease reports whether k acts on the lease namespace (Lease, Renew,
// Release).
func (k Kind) IsLease() bool { return k == Lease || k == Renew || k == Release }

// Input is one call of a verb. Which fields matter depends on Kind:
//
//	Get, TTL        Key
//	Set             Key, Value, TTLMillis (> 0: a deadline; else none)
//	Del             Keys
//	IncrBy          Key, Delta, TTLMillis (used only when it creates the key)
//	CAS             Key, Expected (nil = absent), New (nil = delete), TTLMillis
//	                (> 0: the value written gets that deadline; else a swap
//	                keeps the key's and a created key has none; > 0 with a
//	                nil New is invalid)
//	Expire          Key, TTLMillis (<= 0 deletes)
//	Lease           Key (the lease name), Owner, TTLMillis
//	Renew           Key (the lease name), Owner, Token, TTLMillis
//	Release         Key (the lease name), Owner, Token
//	Sweep           nothing
//	Update          Ops (any verb but Update, Flush, Sweep, Scan, Leases), Abort
//	Flush           Ops (IncrBy only)
//	Scan            Key (a prefix: "" lists every key), All (also expired rows)
//	Leases          Key (a name prefix: "" lists every lease), All (also
//	                expired and released leases)
//
// NowMillis is the engine time the call used, in unix milliseconds. The Ops
// of an Update or Flush run at the parent's NowMillis; their own is ignored.
type Input struct {
	Kind      Kind
	Key       string
	Keys      []string
	Value     Value
	Expected  *Value
	New       *Value
	Delta     int64
	TTLMillis int64
	Token     int64
	Owner     string
	NowMillis int64
	Ops       []Input
	Abort     bool
	All       bool
}

// String describes the call readably, such as `incrby("a", +1) @1000`.
func (in Input) String() string {
	return in.call() + " @" + strconv.FormatInt(in.NowMillis, 10)
}

// call describes the call without its time.
func (in Input) call() string {
	switch in.Kind {
	case Get, TTL:
		return fmt.Sprintf("%s(%q)", in.Kind, in.Key)
	case Set:
		if in.TTLMillis > 0 {
			return fmt.Sprintf("set(%q, %s, ttl=%dms)", in.Key, in.Value, in.TTLMillis)
		}
		return fmt.Sprintf("set(%q, %s)", in.Key, in.Value)
	case Del:
		quoted := make([]string, len(in.Keys))
		for i, k := range in.Keys {
			quoted[i] = strconv.Quote(k)
		}
		return "del(" + strings.Join(quoted, ", ") + ")"
	case IncrBy:
		if in.TTLMillis > 0 {
			return fmt.Sprintf("incrby(%q, %+d, ttl=%dms)", in.Key, in.Delta, in.TTLMillis)
		}
		return fmt.Sprintf("incrby(%q, %+d)", in.Key, in.Delta)
	case CAS:
		if in.TTLMillis > 0 {
			return fmt.Sprintf("cas(%q, %s -> %s, ttl=%dms)", in.Key, describePtr(in.Expected), describePtr(in.New), in.TTLMillis)
		}
		return fmt.Sprintf("cas(%q, %s -> %s)", in.Key, describePtr(in.Expected), describePtr(in.New))
	case Expire:
		return fmt.Sprintf("expire(%q, %dms)", in.Key, in.TTLMillis)
	case Lease:
		return fmt.Sprintf("lease(%q, %q, %dms)", in.Key, in.Owner, in.TTLMillis)
	case Renew:
		return fmt.Sprintf("renew(%q, %q, #%d, %dms)", in.Key, in.Owner, in.Token, in.TTLMillis)
	case Release:
		return fmt.Sprintf("release(%q, %q, #%d)", in.Key, in.Owner, in.Token)
	case Sweep:
		return "sweep()"
	case Scan:
		if in.All {
			return fmt.Sprintf("scan(%q, all)", in.Key)
		}
		return fmt.Sprintf("scan(%q)", in.Key)
	case Leases:
		switch {
		case in.Key != "" && in.All:
			return fmt.Sprintf("leases(%q, all)", in.Key)
		case in.Key != "":
			return fmt.Sprintf("leases(%q)", in.Key)
		case in.All:
			return "leases(all)"
		}
		return "leases()"
	case Update, Flush:
		subs := make([]string, len(in.Ops))
		for i, op := range in.Ops {
			subs[i] = op.call()
		}
		s := in.Kind.String() + "[" + strings.Join(subs, "; ") + "]"
		if in.Abort {
			s += " abort"
		}
		return s
	}
	return in.Kind.String() + "()"
}
