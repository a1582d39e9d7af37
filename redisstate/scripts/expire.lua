-- KEYS[1] the key; ARGV[1] ttl ms: 0 or less deletes. Returns {1 when the
-- key was live, now}.
local now = now_ms()
local ttl = tonumber(ARGV[1])
if ttl <= 0 then
  local live = live_get(KEYS[1], now)
  redis.call('DEL', KEYS[1])
  if live then return {1, now} end
  return {0, now}
end
if not live_get(KEYS[1], now) then return {0, now} end
redis.call('PEXPIREAT', KEYS[1], fmt_ms(now + ttl))
return {1, now}
