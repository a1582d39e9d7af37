package model_test

import (
	"fmt"

	"github.com/statekit/statekit/model"
)

func ExampleStep() {
	s := model.NewState()
	now := int64(1_000)
	s, out := model.Step(s, model.Input{Kind: model.IncrBy, Key: "hits", Delta: 1, TTLMillis: 500, NowMillis: now})
	fmt.Println(out.Int)
	s, out = model.Step(s, model.Input{Kind: model.IncrBy, Key: "hits", Delta: 1, TTLMillis: 9_999, NowMillis: now + 10})
	fmt.Println(out.Int, s.KV["hits"].ExpiresAt) // the deadline of the first call stays
	_, out = model.Step(s, model.Input{Kind: model.Get, Key: "hits", NowMillis: now + 500})
	fmt.Println(out.Err) // expired exactly at its deadline
	// Output:
	// 1
	// 2 1500
	// not_found
}

func ExampleStep_lease() {
	s := model.NewState()
	grant := model.Input{Kind: model.Lease, Key: "leader", Owner: "a", TTLMillis: 100, NowMillis: 0}
	s, out := model.Step(s, grant)
	fmt.Println(model.Describe(grant, out))
	other := model.Input{Kind: model.Lease, Key: "leader", Owner: "b", TTLMillis: 100, NowMillis: 50}
	s, out = model.Step(s, other)
	fmt.Println(model.Describe(other, out))
	other.NowMillis = 100
	_, out = model.Step(s, other)
	fmt.Println(model.Describe(other, out))
	// Output:
	// lease("leader", "a", 100ms) @0 -> #1 until 100
	// lease("leader", "b", 100ms) @50 -> lease_held by "a" until 100
	// lease("leader", "b", 100ms) @100 -> #2 until 200
}
