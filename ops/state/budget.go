package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/ops"
)

// Spend budgets: each budget window is a hash {p}:budget:<name>:<window start> with fields cost, gpuh and gpus, the
// use of every request reserved in it. Each reserved request has {p}:budget-req:<id>, a JSON object naming the
// request (since: when its record was created) and the plan it holds for, the windows it holds and what it holds in
// each, and whether it was released. Both scripts run atomically in Redis, so replicas reserving at once see each
// other's reservations, and both are idempotent per hold (a retry after a lost answer changes nothing).

// reserveScript: KEYS request key, window keys…; ARGV force (0/1), request ttl ms, window ttl ms, since, plan, then
// per window cost, GPU-hours, GPUs, their limits (0 = none) and the window's key. Returns {1, uses…} when the request
// holds every window for this plan (now, or since an earlier call), {0, index, uses…} when window index (1-based)
// would pass a limit; uses are each window's cost, GPU-hours and GPUs as strings. The same request's hold for
// another plan is given back first (and marked released, so nothing gives it back twice); a released hold is held
// anew; another request's hold under the same id (since differs) keeps its windows as they are.
var reserveScript = redis.NewScript(`
local n = #KEYS - 1
local since, plan = ARGV[4], ARGV[5]
local function uses()
  local out = {}
  for i = 1, n do
    local v = redis.call('HMGET', KEYS[i+1], 'cost', 'gpuh', 'gpus')
    for j = 1, 3 do out[#out+1] = v[j] or '0' end
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
    for _, w in ipairs(r.windows) do
      if redis.call('EXISTS', w.key) == 1 then
        redis.call('HINCRBYFLOAT', w.key, 'cost', -tonumber(w.cost))
        redis.call('HINCRBYFLOAT', w.key, 'gpuh', -tonumber(w.gpuh))
        redis.call('HINCRBYFLOAT', w.key, 'gpus', -tonumber(w.gpus))
      end
    end
    r.released = true
    r.used = 0
    redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
  end
end
local force = ARGV[1] == '1'
local eps = 0.000001
for i = 1, n do
  local a = 5 + (i-1)*7
  local v = redis.call('HMGET', KEYS[i+1], 'cost', 'gpuh', 'gpus')
  for j = 1, 3 do
    local limit = tonumber(ARGV[a+3+j])
    local used = tonumber(v[j] or '0')
    if not force and limit > 0 and used + tonumber(ARGV[a+j]) > limit + eps then
      local out = uses()
      table.insert(out, 1, i)
      table.insert(out, 1, 0)
      return out
    end
  end
end
local held = {}
for i = 1, n do
  local a = 5 + (i-1)*7
  redis.call('HINCRBYFLOAT', KEYS[i+1], 'cost', ARGV[a+1])
  redis.call('HINCRBYFLOAT', KEYS[i+1], 'gpuh', ARGV[a+2])
  redis.call('HINCRBYFLOAT', KEYS[i+1], 'gpus', ARGV[a+3])
  redis.call('PEXPIRE', KEYS[i+1], ARGV[3])
  held[i] = {key = KEYS[i+1], cost = ARGV[a+1], gpuh = ARGV[a+2], gpus = ARGV[a+3]}
end
redis.call('SET', KEYS[1], cjson.encode({since = since, plan = plan, windows = held, released = false}), 'PX', ARGV[2])
local out = uses()
table.insert(out, 1, 1)
return out
`)

// releaseScript: KEYS request key, then the window keys it holds (read from it first); ARGV the share (0..1) of the
// cost and GPU-hours used, and since. Gives the rest back and every GPU, marks the request released and keeps its
// ttl. Returns 1 when it released, 0 when it was released before, never reserved or reserved by another request
// with the same id, -1 when the keys do not match its windows.
var budgetReleaseScript = redis.NewScript(`
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local r = cjson.decode(raw)
if r.released or r.since ~= ARGV[2] then return 0 end
if #r.windows ~= #KEYS - 1 then return -1 end
local used = tonumber(ARGV[1])
for i, w in ipairs(r.windows) do
  if w.key ~= KEYS[i+1] then return -1 end
  if redis.call('EXISTS', w.key) == 1 then
    redis.call('HINCRBYFLOAT', w.key, 'cost', -(1 - used) * tonumber(w.cost))
    redis.call('HINCRBYFLOAT', w.key, 'gpuh', -(1 - used) * tonumber(w.gpuh))
    redis.call('HINCRBYFLOAT', w.key, 'gpus', -tonumber(w.gpus))
  end
end
r.released = true
r.used = used
redis.call('SET', KEYS[1], cjson.encode(r), 'KEEPTTL')
return 1
`)

var _ ops.Ledger = (*Store)(nil)

// budgetRetention is how long a window's use is kept after it ends, for reports of the month before.
const budgetRetention = 32 * 24 * time.Hour

func (s *Store) budgetKey(window string) string { return s.key("budget", window) }
func (s *Store) budgetReqKey(id string) string  { return s.key("budget-req", id) }

// Used reads the use of each charge's window, without what except's request holds in it (if it holds).
func (s *Store) BudgetUsed(ctx context.Context, charges []ops.Charge, except ops.BudgetHold) ([]ops.Amount, error) {
	keys := make([]string, len(charges))
	for i, c := range charges {
		keys[i] = c.Key()
	}
	used, err := s.BudgetUsage(ctx, keys)
	if err != nil || except.Request == "" {
		return used, err
	}
	held, err := s.held(ctx, except)
	if err != nil {
		return nil, err
	}
	for i, c := range charges {
		if h, ok := held[s.budgetKey(c.Key())]; ok {
			used[i] = ops.Amount{Cost: used[i].Cost - h.Cost, GPUHours: used[i].GPUHours - h.GPUHours, GPUs: used[i].GPUs - h.GPUs}
		}
	}
	return used, nil
}

// heldHold is a reservation as reserveScript stores it.
type heldHold struct {
	Since    string `json:"since"`
	Released bool   `json:"released"`
	Windows  []struct {
		Key  string `json:"key"`
		Cost string `json:"cost"`
		GPUh string `json:"gpuh"`
		GPUs string `json:"gpus"`
	} `json:"windows"`
}

// held reads what hold's request holds in each window (by window key); none when it holds nothing.
func (s *Store) held(ctx context.Context, hold ops.BudgetHold) (map[string]ops.Amount, error) {
	raw, err := s.rdb.Get(ctx, s.budgetReqKey(hold.Request)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable("read the budget reservation of "+hold.Request, err)
	}
	var r heldHold
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("state: budget reservation of %s: %w", hold.Request, err)
	}
	if r.Released || r.Since != sinceOf(hold) {
		return nil, nil
	}
	out := make(map[string]ops.Amount, len(r.Windows))
	for _, w := range r.Windows {
		a, err := amountOf([]any{w.Cost, w.GPUh, w.GPUs})
		if err != nil {
			return nil, err
		}
		out[w.Key] = a
	}
	return out, nil
}

// Usage reads the use of the named windows; a window nobody used is zero.
func (s *Store) BudgetUsage(ctx context.Context, windows []string) ([]ops.Amount, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(windows))
	for i, w := range windows {
		cmds[i] = pipe.HMGet(ctx, s.budgetKey(w), "cost", "gpuh", "gpus")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read budgets", err)
	}
	out := make([]ops.Amount, len(windows))
	for i, c := range cmds {
		v := c.Val()
		strs := make([]any, 3)
		copy(strs, v)
		a, err := amountOf(strs)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// Reserve holds every charge for hold in one atomic step unless one would pass its limit (force: anyway).
func (s *Store) ReserveBudget(ctx context.Context, hold ops.BudgetHold, charges []ops.Charge, force bool) (ops.Reservation, error) {
	id := hold.Request
	if len(charges) == 0 {
		return ops.Reservation{Reserved: true}, nil
	}
	now := time.Now()
	keys := []string{s.budgetReqKey(id)}
	f := "0"
	if force {
		f = "1"
	}
	var last time.Time
	for _, c := range charges {
		if c.End.After(last) {
			last = c.End
		}
	}
	// The request's record outlives its windows; each window's use is kept a while after it ends.
	reqTTL := max(last.Sub(now)+budgetRetention, time.Minute)
	args := []any{f, ms(reqTTL), ms(reqTTL), sinceOf(hold), hold.Plan}
	for _, c := range charges {
		keys = append(keys, s.budgetKey(c.Key()))
		l := c.Budget.Limit
		args = append(args, fl(c.Amount.Cost), fl(c.Amount.GPUHours), fl(c.Amount.GPUs), fl(l.Cost), fl(l.GPUHours), fl(l.GPUs), c.Key())
	}
	res, err := reserveScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return ops.Reservation{}, unavailable("reserve budgets for "+id, err)
	}
	out := ops.Reservation{Refused: -1}
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
			return ops.Reservation{}, err
		}
		out.Used = append(out.Used, a)
	}
	return out, nil
}

// Release settles hold's request's reservation: used (0..1) of its cost and GPU-hours stays counted, the rest and
// its GPUs go back. Idempotent; another request's reservation under the same id is left alone.
func (s *Store) ReleaseBudget(ctx context.Context, hold ops.BudgetHold, used float64) error {
	id := hold.Request
	raw, err := s.rdb.Get(ctx, s.budgetReqKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return unavailable("read the budget reservation of "+id, err)
	}
	var r struct {
		Windows  []struct{ Key string } `json:"windows"`
		Released bool                   `json:"released"`
		Since    string                 `json:"since"`
	}
	// cjson encodes an empty list as {}, which never happens here: a reservation holds at least one window.
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return fmt.Errorf("state: budget reservation of %s: %w", id, err)
	}
	if r.Released || r.Since != sinceOf(hold) {
		return nil
	}
	keys := []string{s.budgetReqKey(id)}
	for _, w := range r.Windows {
		keys = append(keys, w.Key)
	}
	n, err := budgetReleaseScript.Run(ctx, s.rdb, keys, fl(min(max(used, 0), 1)), sinceOf(hold)).Int64()
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
