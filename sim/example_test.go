package sim_test

import (
	"fmt"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/sim"
)

func ExampleRun() {
	cfg := sim.DefaultConfig(7)
	cfg.Ops = 100
	r, err := sim.Run(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.OK(), r.Stats.Ops)
	fmt.Println(cfg.ReplayLine())
	// Output:
	// true 100
	// statesim -seed 7 -ops 100
}

func ExampleRun_plantedBug() {
	cfg := sim.DefaultConfig(1)
	cfg.Bugs = cfg.Bugs.With(bugs.NoHWM) // time restarts from the wall clock at open
	r, err := sim.Run(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.OK(), r.Checks())
	fmt.Println(cfg.ReplayLine())
	// Output:
	// false [clock]
	// statesim -seed 1 -bug no-hwm
}

func ExampleParseReplay() {
	cfg, err := sim.ParseReplay("statesim -seed 9 -nofaults -crash 0.05 # crashes only")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Seed, cfg.Rates.Crash, cfg.Rates.PowerLoss)
	// Output:
	// 9 0.05 0
}
