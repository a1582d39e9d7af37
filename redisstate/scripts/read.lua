-- A transaction's read, after WATCH. KEYS[1] the key. Returns {value or
-- '', found 1/0, deadline ms since the epoch or -1 for none, now}: found
-- and the deadline as of now, the script's TIME.
local now = now_ms()
local v, at = live_get(KEYS[1], now)
if not v then return {'', 0, -1, now} end
return {v, 1, at, now}
