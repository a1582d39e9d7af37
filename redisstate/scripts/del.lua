-- KEYS the keys, each once. Returns {live keys deleted, now}.
local now = now_ms()
local n = 0
for _, k in ipairs(KEYS) do
  if live_get(k) then n = n + 1 end
  redis.call('DEL', k)
end
return {n, now}
