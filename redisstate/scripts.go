package redisstate

import (
	"embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// The verbs' scripts: each is scripts/lib.lua followed by the verb's own
// file, loaded once per server and run by its SHA (go-redis's Script.Run
// sends EVALSHA and falls back to EVAL when the server does not have it).
var (
	setScript     = loadScript("set")
	delScript     = loadScript("del")
	incrScript    = loadScript("incr")
	casScript     = loadScript("cas")
	expireScript  = loadScript("expire")
	ttlScript     = loadScript("ttl")
	readScript    = loadScript("read")
	flushScript   = loadScript("flush")
	leaseScript   = loadScript("lease")
	renewScript   = loadScript("renew")
	releaseScript = loadScript("release")
)

// script is one verb's Lua script.
type script struct {
	name string
	*redis.Script
}

func loadScript(name string) script {
	lib, err := scriptFiles.ReadFile("scripts/lib.lua")
	if err != nil {
		panic(err)
	}
	own, err := scriptFiles.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return script{name: name, Script: redis.NewScript(string(lib) + string(own))}
}

// Codes the scripts answer with.
const (
	codeOK        = 0
	codeNotInt    = 1
	codeOverflow  = 2
	codeDamaged   = 3
	codeHeld      = 5
	codeLeaseLost = 6
)

// reply is a script's answer: an array whose last element is the server
// time (ms) the script used.
type reply []any

// now returns the server time of the reply.
func (r reply) now() int64 {
	if len(r) == 0 {
		return 0
	}
	n, _ := r.int(len(r) - 1)
	return n
}

// int returns element i as an integer.
func (r reply) int(i int) (int64, error) {
	if i >= len(r) {
		return 0, fmt.Errorf("statekit: script reply has %d elements, wanted %d", len(r), i+1)
	}
	switch x := r[i].(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("statekit: script reply element %d is %T, not an integer", i, r[i])
}

// str returns element i as a string.
func (r reply) str(i int) (string, error) {
	if i >= len(r) {
		return "", fmt.Errorf("statekit: script reply has %d elements, wanted %d", len(r), i+1)
	}
	switch x := r[i].(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", fmt.Errorf("statekit: script reply element %d is %T, not a string", i, r[i])
}
