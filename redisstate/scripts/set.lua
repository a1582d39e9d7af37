-- KEYS[1] the key; ARGV[1] the encoded value; ARGV[2] ttl ms, 0 for none
-- (the old deadline is dropped). Returns {now}.
local now = now_ms()
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', fmt_ms(now + ttl))
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return {now}
