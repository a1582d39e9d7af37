-- KEYS the keys, each once. Returns {live keys deleted, now}. A key of
-- another Redis type fails the script (WRONGTYPE) before anything is
-- deleted, so it never stops halfway.
local now = now_ms()
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'string' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE the key ' .. k .. ' holds a ' .. t)
  end
end
local n = 0
for _, k in ipairs(KEYS) do
  if live_get(k, now) then n = n + 1 end
  redis.call('DEL', k)
end
return {n, now}
