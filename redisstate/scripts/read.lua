-- A transaction's read, after WATCH. KEYS[1] the key. Returns {value or
-- '', found 1/0, deadline ms since the epoch or -1 for none, now}.
local now = now_ms()
local v = live_get(KEYS[1])
if not v then return {'', 0, -1, now} end
return {v, 1, deadline_of(KEYS[1], now), now}
