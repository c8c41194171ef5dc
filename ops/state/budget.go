package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
	"github.com/hyperops/hyperops/ops/engine"
)

// Spend budgets: each budget window is a hash {p}:budget:<name>:<window start> with fields cost and gpuh, the use of
// every run charged to it (a run that goes on past a window's end is charged to each window by overlap). The GPUs
// held at once are counted per budget, not per window: {p}:budget-gpus:<name> is a sorted set of the runs holding
// them, member "<since>|<request id>|<GPUs>", scored by when the run ends at the latest (ms), so a run whose end
// nobody saw stops counting at its deadline. Each reserved request has {p}:budget-req:<id>, a JSON object naming the
// request (since: when its record was created) and the plan it holds for, the windows it holds (key, cost, gpuh, and
// from..to: the window's part of the run, as shares of it), its GPUs' members (atOnce) and whether it was released
// (used: the share of its run it kept). Both scripts run atomically in Redis, so replicas reserving at once see each
// other's reservations, and both are idempotent per hold (a retry after a lost answer changes nothing). A window's
// gpus field and a window entry's gpus are those of holds made before GPUs were kept apart: still counted and given
// back.

// settleLua gives back what hold r does not keep: used (0..1) is the share of its run it used, its earliest part,
// so each window keeps the part of its charge that fell within it; its GPUs at once go back entirely.
const settleLua = `
local function settle(r, used)
  for _, w in ipairs(r.windows) do
    if redis.call('EXISTS', w.key) == 1 then
      local from, to = tonumber(w.from or '0'), tonumber(w.to or '1')
      local keep = 0
      if to > from then keep = math.min(math.max((used - from) / (to - from), 0), 1) end
      redis.call('HINCRBYFLOAT', w.key, 'cost', -(1 - keep) * tonumber(w.cost))
      redis.call('HINCRBYFLOAT', w.key, 'gpuh', -(1 - keep) * tonumber(w.gpuh))
      if w.gpus then redis.call('HINCRBYFLOAT', w.key, 'gpus', -tonumber(w.gpus)) end
    end
  end
  for _, g in ipairs(r.atOnce or {}) do
    redis.call('ZREM', g.key, g.member)
  end
  r.released = true
  r.used = used
end
`

// reserveScript: KEYS request key, then per charge its window key and its budget's GPUs key; ARGV force (0/1), ttl
// ms (of the request key, the windows and the GPUs keys), since, plan, now (ms), request id, then per charge
// cost, GPU-hours, GPUs, their limits (0 = none), the window's part of the run (from, to: shares of it), the run's
// end (ms) and whether it is the window the run starts in (1/0: only there are GPUs at once counted and checked).
// Returns {1, uses…} when the request holds every window for this plan (now, or since an earlier call), {0, index,
// uses…} when charge index (1-based) would pass a limit; uses are each window's cost, GPU-hours and GPUs held at
// once (0 for a later window) as strings. The same request's hold for another plan is given back first (and marked
// released, so nothing gives it back twice); a released hold is held anew; another request's hold under the same id
// (since differs) keeps its windows and GPUs as they are.
var reserveScript = redis.NewScript(settleLua + `
local n = (#KEYS - 1) / 2
local since, plan, now = ARGV[3], ARGV[4], ARGV[5]
local function arg(i, j) return ARGV[6 + (i-1)*10 + j] end
local function atOnce(i)
  local sum = tonumber(redis.call('HGET', KEYS[2*i], 'gpus') or '0')
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2*i+1], '(' .. now, '+inf')) do
    sum = sum + tonumber(string.match(m, '|([^|]*)$'))
  end
  return sum
end
local function use(i)
  local v = redis.call('HMGET', KEYS[2*i], 'cost', 'gpuh')
  local gpus = 0
  if arg(i, 10) == '1' then gpus = atOnce(i) end
  return {tonumber(v[1] or '0'), tonumber(v[2] or '0'), gpus}
end
local function uses()
  local out = {}
  for i = 1, n do
    for _, x in ipairs(use(i)) do out[#out+1] = tostring(x) end
  end
  return out
end
local raw = redis.call('GET', KEYS[1])
if raw then
  local r = cjson.decode(raw)
  if r.since == since and not r.released then
    if r.plan == plan then
      local out = uses()
      table.insert(out, 1, 1)
      return out
    end
    settle(r, 0)
    redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
  end
end
local force = ARGV[1] == '1'
local eps = 0.000001
for i = 1, n do
  local used = use(i)
  for j = 1, 3 do
    local limit = tonumber(arg(i, 3+j))
    if not force and limit > 0 and used[j] + tonumber(arg(i, j)) > limit + eps then
      local out = uses()
      table.insert(out, 1, i)
      table.insert(out, 1, 0)
      return out
    end
  end
end
local windows, gpus = {}, {}
for i = 1, n do
  local w = KEYS[2*i]
  redis.call('HINCRBYFLOAT', w, 'cost', arg(i, 1))
  redis.call('HINCRBYFLOAT', w, 'gpuh', arg(i, 2))
  redis.call('PEXPIRE', w, ARGV[2])
  windows[i] = {key = w, cost = arg(i, 1), gpuh = arg(i, 2), from = arg(i, 7), to = arg(i, 8)}
  if tonumber(arg(i, 3)) > 0 then
    local g, member = KEYS[2*i+1], since .. '|' .. ARGV[6] .. '|' .. arg(i, 3)
    redis.call('ZREMRANGEBYSCORE', g, '-inf', now)
    redis.call('ZADD', g, arg(i, 9), member)
    if redis.call('PTTL', g) < tonumber(ARGV[2]) then redis.call('PEXPIRE', g, ARGV[2]) end
    gpus[#gpus+1] = {key = g, member = member}
  end
end
local rec = {since = since, plan = plan, windows = windows, released = false}
if #gpus > 0 then rec.atOnce = gpus end
redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', ARGV[2])
local out = uses()
table.insert(out, 1, 1)
return out
`)

// releaseScript: KEYS request key, then the window keys it holds and the GPUs keys it holds in (read from it
// first); ARGV the share (0..1) of its run it used, since, and a plan to keep (empty: none). Settles it
// (settleLua), marks it released and keeps its ttl. Returns 1 when it released, 0 when it was released before,
// never reserved, reserved by another request with the same id or for the plan to keep, -1 when the keys do not
// match its own.
var budgetReleaseScript = redis.NewScript(settleLua + `
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local r = cjson.decode(raw)
if r.released or r.since ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' and r.plan == ARGV[3] then return 0 end
local keys = {}
for _, w in ipairs(r.windows) do keys[#keys+1] = w.key end
for _, g in ipairs(r.atOnce or {}) do keys[#keys+1] = g.key end
if #keys ~= #KEYS - 1 then return -1 end
for i, k in ipairs(keys) do
  if k ~= KEYS[i+1] then return -1 end
end
settle(r, tonumber(ARGV[1]))
redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
return 1
`)

var _ engine.Ledger = (*Store)(nil)

// budgetRetention is how long a window's use is kept after it ends, for reports of the month before.
const budgetRetention = 32 * 24 * time.Hour

func (s *Store) budgetKey(window string) string { return s.key("budget", window) }
func (s *Store) budgetReqKey(id string) string  { return s.key("budget-req", id) }

// budgetGPUsKey is the sorted set of the runs holding GPUs at once in the named budget.
func (s *Store) budgetGPUsKey(budget string) string { return s.key("budget-gpus", budget) }

// Used reads the use of each charge's window, without what except's request holds in it (if it holds).
func (s *Store) BudgetUsed(ctx context.Context, charges []ops.Charge, except ops.BudgetHold) ([]ops.Amount, error) {
	var own *heldHold
	if except.Request != "" {
		var err error
		if own, err = s.held(ctx, except); err != nil {
			return nil, err
		}
	}
	return s.usage(ctx, charges, own)
}

// heldHold is a reservation as reserveScript stores it.
type heldHold struct {
	Since    string `json:"since"`
	Released bool   `json:"released"`
	Windows  []struct {
		Key  string `json:"key"`
		Cost string `json:"cost"`
		GPUh string `json:"gpuh"`
		GPUs string `json:"gpus"` // of a hold made before GPUs were kept apart
	} `json:"windows"`
	AtOnce []struct {
		Key    string `json:"key"`
		Member string `json:"member"`
	} `json:"atOnce"`
}

// held reads what hold's request holds; nil when it holds nothing.
func (s *Store) held(ctx context.Context, hold ops.BudgetHold) (*heldHold, error) {
	raw, err := s.rdb.Get(ctx, s.budgetReqKey(hold.Request)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("read the budget reservation of "+hold.Request, err)
	}
	var r heldHold
	// cjson encodes an empty list as {}, which never happens here: a reservation holds at least one window, and
	// atOnce is left out when it holds no GPUs.
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("state: budget reservation of %s: %w", hold.Request, err)
	}
	if r.Released || r.Since != sinceOf(hold) {
		return nil, nil
	}
	return &r, nil
}

// Usage reads the use of the windows and the GPUs held at once at each's RunFrom; a window nobody used is zero.
func (s *Store) BudgetUsage(ctx context.Context, windows []ops.Charge) ([]ops.Amount, error) {
	return s.usage(ctx, windows, nil)
}

// usage reads each charge's window and, for the window a run starts in, its budget's GPUs held at once, without
// what own holds.
func (s *Store) usage(ctx context.Context, charges []ops.Charge, own *heldHold) ([]ops.Amount, error) {
	pipe := s.rdb.Pipeline()
	windows := make([]*redis.SliceCmd, len(charges))
	runs := make([]*redis.StringSliceCmd, len(charges))
	for i, c := range charges {
		windows[i] = pipe.HMGet(ctx, s.budgetKey(c.Key()), "cost", "gpuh", "gpus")
		if !c.Later() {
			runs[i] = pipe.ZRangeByScore(ctx, s.budgetGPUsKey(c.Budget.Name),
				&redis.ZRangeBy{Min: "(" + strconv.FormatInt(c.RunFrom.UnixMilli(), 10), Max: "+inf"})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read budgets", err)
	}
	mine := map[string]bool{}
	ownWindows := map[string][3]any{}
	if own != nil {
		for _, g := range own.AtOnce {
			mine[g.Member] = true
		}
		for _, w := range own.Windows {
			ownWindows[w.Key] = [3]any{w.Cost, w.GPUh, w.GPUs}
		}
	}
	out := make([]ops.Amount, len(charges))
	for i, c := range charges {
		v := make([]any, 3)
		copy(v, windows[i].Val())
		a, err := amountOf(v)
		if err != nil {
			return nil, err
		}
		if w, ok := ownWindows[s.budgetKey(c.Key())]; ok {
			h, err := amountOf(w[:])
			if err != nil {
				return nil, err
			}
			a = ops.Amount{Cost: a.Cost - h.Cost, GPUHours: a.GPUHours - h.GPUHours, GPUs: a.GPUs - h.GPUs}
		}
		if c.Later() {
			a.GPUs = 0
		} else if a.GPUs, err = runGPUs(runs[i].Val(), mine, a.GPUs); err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// runGPUs adds to legacy (what a window counts from holds made before GPUs were kept apart) the GPUs of the runs
// holding them now, but those of mine.
func runGPUs(members []string, mine map[string]bool, legacy float64) (float64, error) {
	sum := legacy
	for _, m := range members {
		if mine[m] {
			continue
		}
		g, err := strconv.ParseFloat(m[strings.LastIndexByte(m, '|')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("state: GPUs held by %q: %w", m, err)
		}
		sum += g
	}
	return sum, nil
}

// Reserve holds every charge for hold in one atomic step unless one would pass its limit (force: anyway).
func (s *Store) ReserveBudget(ctx context.Context, hold ops.BudgetHold, charges []ops.Charge, force bool) (engine.Reservation, error) {
	id := hold.Request
	if len(charges) == 0 {
		// A plan that uses nothing holds nothing: the request's hold for another plan (made before its plan was
		// made again) goes back.
		return engine.Reservation{Reserved: true}, s.settle(ctx, hold, 0, hold.Plan)
	}
	now := charges[0].RunFrom
	if now.IsZero() {
		now = time.Now()
	}
	f := "0"
	if force {
		f = "1"
	}
	var last time.Time
	for _, c := range charges {
		last = later(last, later(c.End, c.RunUntil))
	}
	// The request's record outlives its windows and its run; each window's use is kept a while after it ends.
	ttl := max(last.Sub(now)+budgetRetention, time.Minute)
	keys := []string{s.budgetReqKey(id)}
	args := []any{f, ms(ttl), sinceOf(hold), hold.Plan, now.UnixMilli(), id}
	for _, c := range charges {
		keys = append(keys, s.budgetKey(c.Key()), s.budgetGPUsKey(c.Budget.Name))
		l, first := c.Budget.Limit, "1"
		if c.Later() {
			l.GPUs, first = 0, "0"
		}
		from, to := runPart(c)
		args = append(args, fl(c.Amount.Cost), fl(c.Amount.GPUHours), fl(c.Amount.GPUs), fl(l.Cost), fl(l.GPUHours), fl(l.GPUs),
			fl(from), fl(to), c.RunUntil.UnixMilli(), first)
	}
	res, err := reserveScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return engine.Reservation{}, unavailable("reserve budgets for "+id, err)
	}
	out := engine.Reservation{Refused: -1}
	ok, _ := res[0].(int64)
	rest := res[1:]
	if ok == 1 {
		out.Reserved = true
	} else {
		idx, _ := rest[0].(int64)
		out.Refused = int(idx) - 1
		rest = rest[1:]
	}
	for i := 0; i+2 < len(rest); i += 3 {
		a, err := amountOf(rest[i : i+3])
		if err != nil {
			return engine.Reservation{}, err
		}
		out.Used = append(out.Used, a)
	}
	return out, nil
}

// runPart is c's window's part of the run, as shares (0..1) of it: where the window's overlap with the run starts
// and ends.
func runPart(c ops.Charge) (from, to float64) {
	run := c.RunUntil.Sub(c.RunFrom)
	if run <= 0 {
		return 0, 1
	}
	share := func(t time.Time) float64 {
		return min(max(float64(t.Sub(c.RunFrom))/float64(run), 0), 1)
	}
	from, to = share(c.Start), share(c.End)
	if !c.Later() {
		from = 0
	}
	if !c.End.Before(c.RunUntil) {
		to = 1
	}
	return from, to
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Release settles hold's request's reservation: the earliest used (0..1) of its run stays counted in the windows it
// fell in, the rest and its GPUs go back. Idempotent; another request's reservation under the same id is left alone.
func (s *Store) ReleaseBudget(ctx context.Context, hold ops.BudgetHold, used float64) error {
	return s.settle(ctx, hold, used, "")
}

// settle releases hold's request's reservation (see ReleaseBudget) unless it is for the plan keep.
func (s *Store) settle(ctx context.Context, hold ops.BudgetHold, used float64, keep string) error {
	id := hold.Request
	r, err := s.held(ctx, hold)
	if err != nil || r == nil {
		return err
	}
	keys := []string{s.budgetReqKey(id)}
	for _, w := range r.Windows {
		keys = append(keys, w.Key)
	}
	for _, g := range r.AtOnce {
		keys = append(keys, g.Key)
	}
	n, err := budgetReleaseScript.Run(ctx, s.rdb, keys, fl(min(max(used, 0), 1)), sinceOf(hold), keep).Int64()
	if err != nil {
		return unavailable("release the budget of "+id, err)
	}
	if n < 0 {
		return fmt.Errorf("state: budget reservation of %s changed while releasing it", id)
	}
	return nil
}

// sinceOf names the request a hold is for: its record's creation, to the nanosecond.
func sinceOf(h ops.BudgetHold) string { return strconv.FormatInt(h.Since.UnixNano(), 10) }

func fl(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func amountOf(v []any) (ops.Amount, error) {
	var f [3]float64
	for i := range 3 {
		str, _ := v[i].(string)
		if str == "" {
			continue
		}
		x, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return ops.Amount{}, fmt.Errorf("state: budget use %q: %w", str, err)
		}
		f[i] = x
	}
	return ops.Amount{Cost: f[0], GPUHours: f[1], GPUs: f[2]}, nil
}
