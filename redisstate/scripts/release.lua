-- KEYS[1] the lease hash; ARGV[1] owner, ARGV[2] token. Ends a live lease
-- with this owner and token (expires 0), keeping its token.
-- Returns {0, now}, {6, now} when it is lost, or {3, now} for a damaged
-- hash, which is left as it is.
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expires')
local found, owner, _, _, at = lease_fields(f)
if not found then return {3, now} end
if found == 'none' or owner ~= ARGV[1] or f[2] ~= ARGV[2] or at <= now then
  return {6, now}
end
redis.call('HSET', KEYS[1], 'expires', '0')
return {0, now}
