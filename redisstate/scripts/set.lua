-- KEYS[1] the key; ARGV[1] the encoded value; ARGV[2] ttl ms, 0 for none
-- (the old deadline is dropped). Returns {now}. A key of another Redis
-- type fails the script (WRONGTYPE) and is left as it is: SET would
-- replace a lease's hash (of a store whose prefix nests in this one's)
-- and let its tokens start over.
local now = now_ms()
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE the key ' .. KEYS[1] .. ' holds a ' .. t)
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PXAT', fmt_ms(now + ttl))
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return {now}
