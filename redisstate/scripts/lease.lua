-- KEYS[1] the lease hash; ARGV[1] owner; ARGV[2] ttl ms.
-- Grants a free lease (never granted, expired, released) with token + 1,
-- or extends a live lease of the same owner keeping its token.
-- Returns {0, token, expires, extended, now} granted, extended 1 when the
-- lease was live and kept its token; {5, holder, expires, now}
-- held by another; {3, '', '', now} for a damaged hash (which is left as
-- it is: a token must never start over).
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expires')
local found, owner, h, l, at = lease_fields(f)
if not found then return {3, '', '', now} end
local token = f[2]
if found == 'none' then h, l, at = 0, 0, 0 end
if at > now and owner ~= ARGV[1] then
  return {5, owner, f[3], now}
end
local extended = 1
if at <= now then
  extended = 0
  h, l = add(h, l, 0, 1)
  if not in_range(h, l) then return {3, '', '', now} end
  token = fmt_int(h, l)
end
local until_ = fmt_ms(now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'expires', until_)
return {0, token, until_, extended, now}
