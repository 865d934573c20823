-- wrk script for bench/memory.py: POST a fresh random memory per request, its words drawn as
-- bench/memory.py draws them (Zipf-like pseudo-words), and count answers other than 201.
local syl = {"lo","ka","mi","tor","sel","pra","dun","vek","qui","zan","bel","cor","fen","gil","hus",
             "jor","ta","ron","mis","lek","dor","pan","sul","vin","gar","tex","bo","cy","dra","fu"}
local tech = {"cache","parser","sqlite","index","retry","token","worker","queue","schema","logging",
              "timeout","vector","thread","config","render","client"}
local words = {}
for _, a in ipairs(syl) do for _, b in ipairs(syl) do words[#words + 1] = a .. b end end
for _, a in ipairs(syl) do for _, b in ipairs(syl) do for _, c in ipairs(syl) do
  words[#words + 1] = a .. b .. c end end end
local function word()
  if math.random() < 0.15 then return tech[math.random(#tech)] end
  return words[math.floor((#words) ^ math.random())]
end
local function sentence(n)
  local t = {}
  for i = 1, n do t[i] = word() end
  return table.concat(t, " ")
end
local bad = 0
-- each thread its own stream, and each run another (the run's seed is the script's argument),
-- so a project never receives the same records twice
function setup(thread) thread:set("id", math.random(1, 1000000)) end
function init(args) math.randomseed(id + 7919 * tonumber(args[1] or "0")) end
function request()
  local body = string.format('{"title":"%s %d","rationale":"%s","files_affected":["src/m%d.py"],"tags":["%s"]}',
    sentence(6), math.random(1, 1000000000), sentence(30), math.random(0, 199), tech[math.random(#tech)])
  return wrk.format("POST", nil, nil, body)
end
function response(status) if status ~= 201 then bad = bad + 1 end end
function done(summary, latency, requests) io.write(string.format("non201 %d\n", bad)) end
