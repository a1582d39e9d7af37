-- KEYS[1] the key; ARGV[1] delta (decimal); ARGV[2] ttl ms for a key it
-- creates, 0 for none. Returns {code, new value, now}.
local now = now_ms()
local dh, dl = parse_int(ARGV[1])
local code, s = incr(KEYS[1], dh, dl, tonumber(ARGV[2]), now)
return {code, s, now}
