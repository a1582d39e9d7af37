package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrKind is the error a verb answers, ErrNone for success.
type ErrKind uint8

// The errors a verb can answer. They mirror the engine's sentinel errors.
const (
	// ErrNone is success.
	ErrNone ErrKind = iota
	// ErrNotFound is answered by Get and TTL for an absent or expired key.
	ErrNotFound
	// ErrNotInteger is answered by IncrBy on a live bytes value.
	ErrNotInteger
	// ErrOverflow is answered by IncrBy when the result leaves int64.
	ErrOverflow
	// ErrLeaseHeld is answered by Lease when another owner holds it.
	ErrLeaseHeld
	// ErrLeaseLost is answered by Renew and Release when the caller no
	// longer holds the lease (expired, released, or a newer token).
	ErrLeaseLost
	// ErrAborted is answered by an Update whose Abort is set: its callback
	// returned its own error, so everything rolled back.
	ErrAborted
	// ErrInvalid is answered for input the engine refuses (see the package
	// doc); nothing changes.
	ErrInvalid
	errKindEnd
)

var errNames = [...]string{
	ErrNone: "none", ErrNotFound: "not_found", ErrNotInteger: "not_integer", ErrOverflow: "overflow",
	ErrLeaseHeld: "lease_held", ErrLeaseLost: "lease_lost", ErrAborted: "aborted", ErrInvalid: "invalid",
}

// String returns the error's name, such as "not_found", or "err(N)" for an
// unknown ErrKind.
func (e ErrKind) String() string {
	if e < errKindEnd {
		return errNames[e]
	}
	return "err(" + strconv.Itoa(int(e)) + ")"
}

// MarshalText encodes e as its name. It returns an error for an unknown
// ErrKind.
func (e ErrKind) MarshalText() ([]byte, error) {
	if e >= errKindEnd {
		return nil, fmt.Errorf("model: cannot encode %s", e)
	}
	return []byte(errNames[e]), nil
}

// UnmarshalText decodes a name written by MarshalText; it returns an error
// for an unknown name.
func (e *ErrKind) UnmarshalText(b []byte) error {
	for i := ErrNone; i < errKindEnd; i++ {
		if errNames[i] == string(b) {
			*e = i
			return nil
		}
	}
	return fmt.Errorf("model: unknown error kind %q", b)
}

// aborts reports whether e, answered by a verb inside an Update, rolls the
// Update back: every error but ErrNotFound does.
func (e ErrKind) aborts() bool { return e != ErrNone && e != ErrNotFound }

// Output is what a verb answers. Step fills only the fields its Kind
// defines:
//
//	all             Err
//	Get             Value
//	IncrBy          Int (the new value)
//	CAS, Expire     OK
//	Del, Sweep      N
//	TTL             TTLMillis (NoExpiry when there is no deadline)
//	Lease           Token, ExpiresAt, OK (the lease was live and held by
//	                the same owner: extended, its token kept); on
//	                ErrLeaseHeld Owner and ExpiresAt of the holder
//	Renew           ExpiresAt
//	                (ExpiresAt: unix milliseconds, as everywhere)
//	Update, Flush   Sub: one Output per sub-input run (an aborted Update
//	                stops after the failing one)
//	Scan            Rows, in byte order of the keys
//	Leases          Leases, in byte order of the names
type Output struct {
	Err       ErrKind
	Value     Value
	Int       int64
	OK        bool
	N         int
	TTLMillis int64
	Token     int64
	ExpiresAt int64
	Owner     string
	Sub       []Output
	Rows      []KeyRow
	Leases    []NamedLease
}

// Equal reports whether o and p are identical in every field.
func (o Output) Equal(p Output) bool {
	if o.Err != p.Err || o.Value != p.Value || o.Int != p.Int || o.OK != p.OK || o.N != p.N ||
		o.TTLMillis != p.TTLMillis || o.Token != p.Token || o.ExpiresAt != p.ExpiresAt ||
		o.Owner != p.Owner || len(o.Sub) != len(p.Sub) ||
		!slices.Equal(o.Rows, p.Rows) || !slices.Equal(o.Leases, p.Leases) {
		return false
	}
	for i := range o.Sub {
		if !o.Sub[i].Equal(p.Sub[i]) {
			return false
		}
	}
	return true
}

// Matches reports whether got, an answer observed for in, agrees with want,
// the answer Step gave for in, on the fields in.Kind defines (see Output).
// Fields the Kind does not define are ignored, so a recorder may leave them
// zero or fill them. On ErrLeaseHeld the holder's Owner and ExpiresAt are
// compared only when got.Owner is not empty (a recorder that did not see the
// holder leaves it empty).
func Matches(in Input, want, got Output) bool {
	if want.Err != got.Err {
		return false
	}
	switch in.Kind {
	case Get:
		return want.Err != ErrNone || want.Value == got.Value
	case IncrBy:
		return want.Err != ErrNone || want.Int == got.Int
	case CAS, Expire:
		return want.OK == got.OK
	case Del, Sweep:
		return want.N == got.N
	case TTL:
		return want.Err != ErrNone || want.TTLMillis == got.TTLMillis
	case Lease:
		switch want.Err {
		case ErrNone:
			return want.Token == got.Token && want.ExpiresAt == got.ExpiresAt && want.OK == got.OK
		case ErrLeaseHeld:
			return got.Owner == "" || (want.Owner == got.Owner && want.ExpiresAt == got.ExpiresAt)
		}
		return true
	case Renew:
		return want.Err != ErrNone || want.ExpiresAt == got.ExpiresAt
	case Scan:
		return slices.Equal(want.Rows, got.Rows)
	case Leases:
		return slices.Equal(want.Leases, got.Leases)
	case Update, Flush:
		if len(want.Sub) != len(got.Sub) {
			return false
		}
		for i := range want.Sub {
			if !Matches(in.Ops[i], want.Sub[i], got.Sub[i]) {
				return false
			}
		}
	}
	return true
}

// Describe returns in and out together readably, such as
// `incrby("a", +1) @1000 -> 6`, showing the fields in.Kind defines.
func Describe(in Input, out Output) string {
	return in.String() + " -> " + describeOutput(in, out)
}

// describeOutput describes out as an answer to in.
func describeOutput(in Input, out Output) string {
	switch {
	case out.Err == ErrLeaseHeld && out.Owner != "":
		return fmt.Sprintf("lease_held by %q until %d", out.Owner, out.ExpiresAt)
	case out.Err != ErrNone && in.Kind != Update && in.Kind != Flush:
		return out.Err.String()
	}
	switch in.Kind {
	case Get:
		return out.Value.String()
	case IncrBy:
		return strconv.FormatInt(out.Int, 10)
	case CAS, Expire:
		return strconv.FormatBool(out.OK)
	case Del, Sweep:
		return "n=" + strconv.Itoa(out.N)
	case TTL:
		if out.TTLMillis == NoExpiry {
			return "no expiry"
		}
		return strconv.FormatInt(out.TTLMillis, 10) + "ms"
	case Lease:
		if out.OK {
			return fmt.Sprintf("#%d until %d, extended", out.Token, out.ExpiresAt)
		}
		return fmt.Sprintf("#%d until %d", out.Token, out.ExpiresAt)
	case Renew:
		return fmt.Sprintf("until %d", out.ExpiresAt)
	case Scan:
		return describeRows(out.Rows)
	case Leases:
		return describeLeases(out.Leases)
	case Update, Flush:
		subs := make([]string, len(out.Sub))
		for i, s := range out.Sub {
			if i < len(in.Ops) {
				subs[i] = describeOutput(in.Ops[i], s)
			} else {
				subs[i] = s.String()
			}
		}
		return out.Err.String() + " [" + strings.Join(subs, "; ") + "]"
	}
	return "ok"
}

// String describes o without knowing its verb: the error and every non-zero
// field, such as {err=none int=6}. Describe is more readable when the Input
// is at hand.
func (o Output) String() string {
	parts := []string{"err=" + o.Err.String()}
	if o.Value != (Value{}) {
		parts = append(parts, "value="+o.Value.String())
	}
	if o.Int != 0 {
		parts = append(parts, "int="+strconv.FormatInt(o.Int, 10))
	}
	if o.OK {
		parts = append(parts, "ok=true")
	}
	if o.N != 0 {
		parts = append(parts, "n="+strconv.Itoa(o.N))
	}
	if o.TTLMillis != 0 {
		parts = append(parts, "ttl="+strconv.FormatInt(o.TTLMillis, 10))
	}
	if o.Token != 0 {
		parts = append(parts, "token="+strconv.FormatInt(o.Token, 10))
	}
	if o.ExpiresAt != 0 {
		parts = append(parts, "expires="+strconv.FormatInt(o.ExpiresAt, 10))
	}
	if o.Owner != "" {
		parts = append(parts, "owner="+strconv.Quote(o.Owner))
	}
	for _, s := range o.Sub {
		parts = append(parts, "sub="+s.String())
	}
	if len(o.Rows) > 0 {
		parts = append(parts, "rows="+describeRows(o.Rows))
	}
	if len(o.Leases) > 0 {
		parts = append(parts, "leases="+describeLeases(o.Leases))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// describeRows describes a Scan's rows, such as ["a"=7 exp@1500, "b"="x"].
func describeRows(rows []KeyRow) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = strconv.Quote(r.Key) + "=" + r.Entry.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// describeLeases describes a Leases listing, such as ["l"=owner "o1" #3 exp@2000].
func describeLeases(leases []NamedLease) string {
	parts := make([]string, len(leases))
	for i, l := range leases {
		parts[i] = strconv.Quote(l.Name) + "=" + l.LeaseRow.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
