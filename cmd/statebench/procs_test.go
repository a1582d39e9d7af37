package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// asParent makes the test binary, re-executed, start one worker process of
// the multi-process scenario on a file in the directory the variable
// names, with an hour's budget, tell it to go, print its pid and run until
// it is killed.
const asParent = "STATEBENCH_TEST_AS_PARENT"

// parentOfOneWorker is the test binary's main under asParent.
func parentOfOneWorker(dir string) int {
	e := &env{exe: os.Args[0], dir: dir}
	ws, err := startWorkers(e, procRun{n: 1, key: "k", wait: waitEngine}, e.path("procs.state"), budget{d: time.Hour})
	if err == nil {
		_, err = io.WriteString(ws[0].in, "go\n")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ws[0].cmd.Process.Pid)
	for {
		time.Sleep(time.Hour)
	}
}
