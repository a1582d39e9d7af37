-- KEYS the keys, ARGV the deltas (decimal) in the same order, added with
-- IncrBy's rules and no TTL. Returns {code for each key, now}: 0 done,
-- 1 not an integer, 2 overflow, 3 damaged (a value without a valid tag,
-- or a key of another Redis type). Every key's type is looked at before
-- anything is written, so the script never stops halfway on an error.
local now = now_ms()
local out = {}
local bad = {}
for i, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'string' and t ~= 'none' then bad[i] = true end
end
for i, k in ipairs(KEYS) do
  if bad[i] then
    out[i] = 3
  else
    local dh, dl = parse_int(ARGV[i])
    out[i] = incr(k, dh, dl, 0, now)
  end
end
out[#KEYS + 1] = now
return out
