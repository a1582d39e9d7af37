-- KEYS[1] the key. Returns {PTTL: -2 absent, -1 no deadline, else ms, now}.
local now = now_ms()
local p = redis.call('PTTL', KEYS[1])
if p == 0 then p = -2 end
return {p, now}
