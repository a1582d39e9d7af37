-- KEYS[1] the key; ARGV[1] '1' when a value is expected, ARGV[2] it
-- (encoded); ARGV[3] '1' when a new value is given, ARGV[4] it; ARGV[5]
-- ttl ms, 0 for none (a swap keeps the deadline, a create has none).
-- Returns {swapped 1/0, now}.
local now = now_ms()
local cur = live_get(KEYS[1], now)
local ttl = tonumber(ARGV[5])
if ARGV[1] == '1' then
  if cur ~= ARGV[2] then return {0, now} end
else
  if cur then return {0, now} end
end
if ARGV[3] ~= '1' then
  if cur then redis.call('DEL', KEYS[1]) end
  return {1, now}
end
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[4], 'PXAT', fmt_ms(now + ttl))
elseif cur then
  redis.call('SET', KEYS[1], ARGV[4], 'KEEPTTL')
else
  redis.call('SET', KEYS[1], ARGV[4])
end
return {1, now}
