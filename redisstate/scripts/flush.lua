-- KEYS the keys, ARGV the deltas (decimal) in the same order, added with
-- IncrBy's rules and no TTL. Returns {now, code for each key}: 0 done,
-- 1 not an integer, 2 overflow, 3 damaged.
local now = now_ms()
local out = {now}
for i, k in ipairs(KEYS) do
  local dh, dl = parse_int(ARGV[i])
  local code = incr(k, dh, dl, 0, now)
  out[i + 1] = code
end
return out
