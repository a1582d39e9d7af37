package linearizability_test

import (
	"fmt"

	"github.com/statekit/statekit/linearizability"
	"github.com/statekit/statekit/model"
)

func ExampleCheck() {
	grant := model.Input{Kind: model.Lease, Key: "leader", Owner: "a", TTLMillis: 100, NowMillis: 1_000}
	steal := model.Input{Kind: model.Lease, Key: "leader", Owner: "b", TTLMillis: 100, NowMillis: 1_200}
	history := []linearizability.Op{
		{Client: 1, Input: grant, Output: model.Output{Token: 1, ExpiresAt: 1_100}, Call: 1, Return: 2, Durability: linearizability.Full},
		linearizability.PowerLossAt(3),
		// After the reboot the grant must still be there: a FULL commit is durable.
		{Client: 2, Input: steal, Output: model.Output{Token: 1, ExpiresAt: 1_300}, Call: 4, Return: 5, Durability: linearizability.Full},
	}
	res := linearizability.Check(history, 0)
	fmt.Println(res)
	fmt.Println(res.Description)
	// Output:
	// Illegal in partition l:leader (1 partitions, 3 operations)
	// partition l:leader is not linearizable (3 operations)
	// longest linearizable prefix: 2 operations:
	//   #0 c1 [1,2] lease("leader", "a", 100ms) @1000 -> #1 until 1100 full
	//   #1 power loss at 3
	// state after it: owner "a" #1 exp@1100
	// none of these can come next:
	//   #2 c2 [4,5] lease("leader", "b", 100ms) @1200 -> #1 until 1300 full  (spec: #2 until 1300)
}
