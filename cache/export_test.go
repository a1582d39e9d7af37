package cache

// SetMissHook makes every later GetOrCompute call that finds its key missing
// call f once, before it asks for the lease, so a test can hold the
// computation until every caller has missed. Set it before any call.
func SetMissHook(f func(key string)) { missHook = f }
