package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/statekit/statekit/internal/childproc"
	"github.com/statekit/statekit/state"
)

// memoryHandles is how many handles the memory scenario opens at once.
const memoryHandles = 8

// memoryResult is what the memory worker reports.
type memoryResult struct {
	HeapBefore, HeapAfter int64
	RSSBefore, RSSAfter   int64
}

// runMemory measures, in a fresh process, the Go heap and the resident
// memory that open handles hold, per handle.
func runMemory(e *env) ([]Result, error) {
	dir := e.path("memory")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.exe, childArg, "-mode", "memory", "-path", dir)
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	err := childproc.Start(cmd) // on Linux it dies with statebench
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return nil, fmt.Errorf("memory worker: %w", err)
	}
	var m memoryResult
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return nil, fmt.Errorf("memory worker: %w", err)
	}
	heap := float64(m.HeapAfter-m.HeapBefore) / memoryHandles
	rss := float64(m.RSSAfter-m.RSSBefore) / memoryHandles
	r := Result{Scenario: "memory", Subject: Measure{Name: "DB handle"}, Baseline: Measure{Name: "-"}}
	r.Extra = map[string]float64{"go_heap_bytes_per_handle": heap, "rss_bytes_per_handle": rss}
	r.Notes = append(r.Notes, fmt.Sprintf("per handle (%d open in a fresh process, each after writing and reading %d keys): Go heap %.0f KiB, resident %.0f KiB (SQLite's page cache, up to 2 MiB a connection, and its statements live outside the Go heap)",
		memoryHandles, keySpace, heap/1024, rss/1024))
	return []Result{r}, nil
}

// childMemory is the memory worker: it opens memoryHandles handles in dir,
// works each a little, and reports the memory before and after as JSON.
func childMemory(dir string) error {
	ctx := context.Background()
	m := memoryResult{HeapBefore: heapBytes(), RSSBefore: rssBytes()}
	var dbs []*state.DB
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	value := []byte("a value of some thirty-two bytes")
	for i := range memoryHandles {
		db, err := state.Open(fmt.Sprintf("%s/mem%d.state", dir, i))
		if err != nil {
			return err
		}
		dbs = append(dbs, db)
		for k := range int64(keySpace) {
			if err := db.Set(ctx, keyName(k), value); err != nil {
				return err
			}
			if _, err := db.Get(ctx, keyName(k)); err != nil {
				return err
			}
		}
	}
	m.HeapAfter, m.RSSAfter = heapBytes(), rssBytes()
	return json.NewEncoder(os.Stdout).Encode(m)
}

// heapBytes returns the live Go heap after a collection.
func heapBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
