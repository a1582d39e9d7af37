package model

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// JSON encoding. encoding/json replaces invalid UTF-8 in strings with
// U+FFFD, which would corrupt byte values in a recorded history, so every
// string of a Value, Input and Output is written as a JSON string when it is
// valid UTF-8 and as {"base64": "..."} otherwise. Kinds and error kinds are
// written by name. Decoding accepts both forms, so a history round-trips
// exactly.

// text is a string that survives a JSON round trip byte for byte.
type text string

type base64Text struct {
	Base64 string `json:"base64"`
}

// MarshalJSON writes t as a JSON string, or as {"base64": ...} when t is not
// valid UTF-8.
func (t text) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(base64Text{Base64: base64.StdEncoding.EncodeToString([]byte(t))})
}

// UnmarshalJSON reads either form written by MarshalJSON.
func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = text(s)
		return nil
	}
	var b64 base64Text
	if err := json.Unmarshal(b, &b64); err != nil {
		return fmt.Errorf("model: text: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(b64.Base64)
	if err != nil {
		return fmt.Errorf("model: text: %w", err)
	}
	*t = text(raw)
	return nil
}

type valueJSON struct {
	Int   *int64 `json:"int,omitempty"`
	Bytes *text  `json:"bytes,omitempty"`
}

// MarshalJSON writes v as {"int": N} or {"bytes": "..."}.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.IsInt {
		return json.Marshal(valueJSON{Int: &v.Int})
	}
	b := text(v.Bytes)
	return json.Marshal(valueJSON{Bytes: &b})
}

// UnmarshalJSON reads a Value written by MarshalJSON; it returns an error
// when the object holds both an int and bytes.
func (v *Value) UnmarshalJSON(b []byte) error {
	var j valueJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("model: value: %w", err)
	}
	switch {
	case j.Int != nil && j.Bytes != nil:
		return fmt.Errorf("model: value %s has both int and bytes", b)
	case j.Int != nil:
		*v = Int(*j.Int)
	case j.Bytes != nil:
		*v = Bytes(string(*j.Bytes))
	default:
		*v = Value{}
	}
	return nil
}

type inputJSON struct {
	Kind      Kind    `json:"kind"`
	Key       text    `json:"key,omitempty"`
	Keys      []text  `json:"keys,omitempty"`
	Value     *Value  `json:"value,omitempty"`
	Expected  *Value  `json:"expected,omitempty"`
	New       *Value  `json:"new,omitempty"`
	Delta     int64   `json:"delta,omitempty"`
	TTLMillis int64   `json:"ttl_ms,omitempty"`
	Token     int64   `json:"token,omitempty"`
	Owner     text    `json:"owner,omitempty"`
	NowMillis int64   `json:"now_ms"`
	Ops       []Input `json:"ops,omitempty"`
	Abort     bool    `json:"abort,omitempty"`
	All       bool    `json:"all,omitempty"`
}

// MarshalJSON writes in with lower-case field names, omitting zero fields
// but kind and now_ms, which are always written (the zero Kind as "").
func (in Input) MarshalJSON() ([]byte, error) {
	j := inputJSON{
		Kind: in.Kind, Key: text(in.Key), Expected: in.Expected, New: in.New, Delta: in.Delta,
		TTLMillis: in.TTLMillis, Token: in.Token, Owner: text(in.Owner), NowMillis: in.NowMillis,
		Ops: in.Ops, Abort: in.Abort, All: in.All,
	}
	if in.Value != (Value{}) {
		j.Value = &in.Value
	}
	for _, k := range in.Keys {
		j.Keys = append(j.Keys, text(k))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an Input written by MarshalJSON; it returns an error
// for an unknown kind name or a malformed field.
func (in *Input) UnmarshalJSON(b []byte) error {
	var j inputJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("model: input: %w", err)
	}
	*in = Input{
		Kind: j.Kind, Key: string(j.Key), Expected: j.Expected, New: j.New, Delta: j.Delta,
		TTLMillis: j.TTLMillis, Token: j.Token, Owner: string(j.Owner), NowMillis: j.NowMillis,
		Ops: j.Ops, Abort: j.Abort, All: j.All,
	}
	if j.Value != nil {
		in.Value = *j.Value
	}
	for _, k := range j.Keys {
		in.Keys = append(in.Keys, string(k))
	}
	return nil
}

type outputJSON struct {
	Err       ErrKind     `json:"err"`
	Value     *Value      `json:"value,omitempty"`
	Int       int64       `json:"int,omitempty"`
	OK        bool        `json:"ok,omitempty"`
	N         int         `json:"n,omitempty"`
	TTLMillis int64       `json:"ttl_ms,omitempty"`
	Token     int64       `json:"token,omitempty"`
	ExpiresAt int64       `json:"expires_at,omitempty"`
	Owner     text        `json:"owner,omitempty"`
	Sub       []Output    `json:"sub,omitempty"`
	Rows      []rowJSON   `json:"rows,omitempty"`
	Leases    []leaseJSON `json:"leases,omitempty"`
}

// rowJSON is a KeyRow as JSON.
type rowJSON struct {
	Key       text  `json:"key"`
	Value     Value `json:"value"`
	ExpiresAt int64 `json:"expires_at,omitempty"`
}

// leaseJSON is a NamedLease as JSON.
type leaseJSON struct {
	Name      text  `json:"name"`
	Owner     text  `json:"owner"`
	Token     int64 `json:"token"`
	ExpiresAt int64 `json:"expires_at,omitempty"`
}

// MarshalJSON writes o with lower-case field names, omitting zero fields
// but err, which is always written ("none" for ErrNone).
func (o Output) MarshalJSON() ([]byte, error) {
	j := outputJSON{
		Err: o.Err, Int: o.Int, OK: o.OK, N: o.N, TTLMillis: o.TTLMillis, Token: o.Token,
		ExpiresAt: o.ExpiresAt, Owner: text(o.Owner), Sub: o.Sub,
	}
	if o.Value != (Value{}) {
		j.Value = &o.Value
	}
	for _, r := range o.Rows {
		j.Rows = append(j.Rows, rowJSON{Key: text(r.Key), Value: r.Value, ExpiresAt: r.ExpiresAt})
	}
	for _, l := range o.Leases {
		j.Leases = append(j.Leases, leaseJSON{Name: text(l.Name), Owner: text(l.Owner), Token: l.Token, ExpiresAt: l.ExpiresAt})
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads an Output written by MarshalJSON; it returns an error
// for an unknown error name or a malformed field.
func (o *Output) UnmarshalJSON(b []byte) error {
	var j outputJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("model: output: %w", err)
	}
	*o = Output{
		Err: j.Err, Int: j.Int, OK: j.OK, N: j.N, TTLMillis: j.TTLMillis, Token: j.Token,
		ExpiresAt: j.ExpiresAt, Owner: string(j.Owner), Sub: j.Sub,
	}
	if j.Value != nil {
		o.Value = *j.Value
	}
	for _, r := range j.Rows {
		o.Rows = append(o.Rows, KeyRow{Key: string(r.Key), Entry: Entry{Value: r.Value, ExpiresAt: r.ExpiresAt}})
	}
	for _, l := range j.Leases {
		o.Leases = append(o.Leases, NamedLease{Name: string(l.Name), LeaseRow: LeaseRow{Owner: string(l.Owner), Token: l.Token, ExpiresAt: l.ExpiresAt}})
	}
	return nil
}
