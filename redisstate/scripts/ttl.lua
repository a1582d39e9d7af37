-- KEYS[1] the key. Returns {-2 absent, -1 no deadline, else the ms left
-- (deadline - now, always above 0), now}: counted from the script's TIME,
-- not from the later clock reading Redis's PTTL uses.
local now = now_ms()
local v, at = live_get(KEYS[1], now)
if not v then return {-2, now} end
if at < 0 then return {-1, now} end
return {at - now, now}
