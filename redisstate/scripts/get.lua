-- KEYS[1] the key. Returns {value or '', found 1/0, now}.
local now = now_ms()
local v = live_get(KEYS[1], now)
if not v then return {'', 0, now} end
return {v, 1, now}
