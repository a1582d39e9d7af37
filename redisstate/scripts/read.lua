-- A transaction's read, after WATCH. KEYS[1] the key. Returns {value or
-- '', found 1/0, PTTL, now}.
local now = now_ms()
local v = live_get(KEYS[1])
if not v then return {'', 0, -2, now} end
return {v, 1, redis.call('PTTL', KEYS[1]), now}
