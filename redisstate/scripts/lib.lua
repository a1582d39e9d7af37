-- statekit helpers, put before every script's own text.
-- Lua numbers are doubles: an int64 is never held in one. A value is split
-- into hi (the digits above the last 9) and lo (the last 9 digits), each
-- exact in a double, and added, compared and printed in that form.

local B = 1000000000
-- the bounds of int64 as normalized pairs (h, l) with 0 <= l < B
local MAX_H, MAX_L = 9223372036, 854775807
local MIN_H, MIN_L = -9223372037, 145224192

-- now_ms returns the server's time in milliseconds since the epoch.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- deadline_of returns a key's deadline in ms since the epoch, or -1 for
-- none (or no key): PEXPIRETIME where the server has it (Redis 7), else
-- now + PTTL, which Redis counts from a clock reading after the script's
-- TIME, so it may fall a millisecond short there.
local function deadline_of(key, now)
  local at = redis.pcall('PEXPIRETIME', key)
  if type(at) == 'number' then
    if at < 0 then return -1 end
    return at
  end
  local p = redis.call('PTTL', key)
  if p < 0 then return -1 end
  return now + p
end

-- live_get returns the value of a key live at now (the script's TIME) and
-- its deadline (-1 for none), or nil. Redis keeps a key through its
-- deadline's millisecond, and judges it by a clock reading of its own;
-- statekit's file engine counts it gone from that millisecond on (live
-- while deadline > now), and so does this, at the script's now, whatever
-- Redis's own reading says.
local function live_get(key, now)
  local v = redis.call('GET', key)
  if not v then return nil, -1 end
  local at = deadline_of(key, now)
  if at >= 0 and at <= now then return nil, -1 end
  return v, at
end

local function fmt_ms(n)
  return string.format('%d', n)
end

-- parse_int reads canonical decimal text (no '+', no leading zeros, no
-- '-0') of at most 19 digits as (hi, lo), both carrying the sign; nil for
-- anything else.
local function parse_int(s)
  if type(s) ~= 'string' then return nil end
  local neg, digits = string.match(s, '^(%-?)(%d+)$')
  if not digits or #digits > 19 then return nil end
  if #digits > 1 and string.sub(digits, 1, 1) == '0' then return nil end
  if neg == '-' and digits == '0' then return nil end
  local lo = tonumber(string.sub(digits, -9))
  local hi = 0
  if #digits > 9 then hi = tonumber(string.sub(digits, 1, #digits - 9)) end
  if neg == '-' then return -hi, -lo end
  return hi, lo
end

-- add returns a + b as a normalized pair (h, l), 0 <= l < B.
local function add(ah, al, bh, bl)
  local h, l = ah + bh, al + bl
  local c = math.floor(l / B)
  return h + c, l - c * B
end

local function in_range(h, l)
  if h > MAX_H or (h == MAX_H and l > MAX_L) then return false end
  if h < MIN_H or (h == MIN_H and l < MIN_L) then return false end
  return true
end

-- fmt_int prints a normalized pair as decimal text.
local function fmt_int(h, l)
  local neg = h < 0
  if neg then
    if l == 0 then h = -h else h, l = -h - 1, B - l end
  end
  local s
  if h == 0 then s = string.format('%d', l) else s = string.format('%d%09d', h, l) end
  if neg then return '-' .. s end
  return s
end

-- int_value decodes a stored value that must be an integer: it returns
-- (h, l) normalized, or nil and a code: 1 for bytes, 3 for a damaged value.
local function int_value(v)
  local tag = string.sub(v, 1, 2)
  if tag == 'b:' then return nil, 1 end
  if tag ~= 'i:' then return nil, 3 end
  local h, l = parse_int(string.sub(v, 3))
  if not h then return nil, 3 end
  h, l = add(h, l, 0, 0)
  if not in_range(h, l) then return nil, 3 end
  return h, l
end

-- incr adds the delta (dh, dl) to the value at key with IncrBy's rules.
-- ttl > 0 gives a key it creates the deadline now + ttl. It returns a code
-- (0 done, 1 not an integer, 2 overflow, 3 damaged) and the new value.
local function incr(key, dh, dl, ttl, now)
  local cur = live_get(key, now)
  if not cur then
    local s = fmt_int(add(dh, dl, 0, 0))
    if ttl > 0 then
      redis.call('SET', key, 'i:' .. s, 'PXAT', fmt_ms(now + ttl))
    else
      redis.call('SET', key, 'i:' .. s)
    end
    return 0, s
  end
  local h, l = int_value(cur)
  if not h then return l, '' end
  h, l = add(h, l, dh, dl)
  if not in_range(h, l) then return 2, '' end
  local s = fmt_int(h, l)
  redis.call('SET', key, 'i:' .. s, 'KEEPTTL')
  return 0, s
end

-- token_value reads a fencing token (an integer of at least 1) as a
-- normalized pair, or nil.
local function token_value(s)
  if type(s) ~= 'string' or not string.match(s, '^[1-9]%d*$') then return nil end
  local h, l = parse_int(s)
  if not h then return nil end
  h, l = add(h, l, 0, 0)
  if not in_range(h, l) then return nil end
  return h, l
end

-- deadline_value reads a lease's expires field (ms, 0 once released), or nil.
local function deadline_value(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end

-- lease_fields reads a lease hash as HMGET owner token expires returned
-- it: 'none' for a name never granted (no field at all); nil for a damaged
-- hash (a field missing, an empty owner, a token that token_value refuses,
-- a deadline that deadline_value refuses); else 'ok', the owner, the token
-- as a pair and the deadline. Every lease script reads a hash through it,
-- and redisstate's Go code by the same rules (leasehash.go), so a damaged
-- hash is damaged to every verb and never rewritten.
local function lease_fields(f)
  local owner, token, expires = f[1], f[2], f[3]
  if not owner and not token and not expires then return 'none' end
  local h, l = token_value(token)
  local at = deadline_value(expires)
  if not h or not at or not owner or owner == '' then return nil end
  return 'ok', owner, h, l, at
end

