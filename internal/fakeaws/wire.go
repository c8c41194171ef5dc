package fakeaws

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// epochTime is a timestamp as awsJson and REST-JSON carry it by default: epoch seconds, fractional.
type epochTime time.Time

func (t epochTime) MarshalJSON() ([]byte, error) {
	ms := time.Time(t).UnixMilli()
	return []byte(strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)), nil
}

func (t *epochTime) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("timestamp %s: %w", b, err)
	}
	*t = epochTime(time.UnixMilli(int64(math.Round(f * 1000))))
	return nil
}

func epochPtr(t time.Time) *epochTime {
	e := epochTime(t)
	return &e
}

// violations collects constraint failures and renders them like AWS's request validation does:
// "2 validation errors detected: Value '…' at '…' failed to satisfy constraint: …; …".
type violations []string

func (v *violations) add(format string, args ...any) { *v = append(*v, fmt.Sprintf(format, args...)) }

func (v *violations) required(path string, present bool) bool {
	if !present {
		v.add("Value null at '%s' failed to satisfy constraint: Member must not be null", path)
	}
	return present
}

func (v *violations) pattern(path, value string, re *regexp.Regexp) {
	if !re.MatchString(value) {
		v.add("Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: %s",
			value, path, re.String())
	}
}

func (v *violations) length(path, value string, minLen, maxLen int) {
	if len(value) < minLen || len(value) > maxLen {
		v.add("Value '%s' at '%s' failed to satisfy constraint: Member must have length between %d and %d",
			value, path, minLen, maxLen)
	}
}

func (v *violations) between(path string, value, minV, maxV int) {
	if value < minV {
		v.add("Value '%d' at '%s' failed to satisfy constraint: Member must have value greater than or equal to %d",
			value, path, minV)
	}
	if value > maxV {
		v.add("Value '%d' at '%s' failed to satisfy constraint: Member must have value less than or equal to %d",
			value, path, maxV)
	}
}

func (v *violations) oneOf(path, value string, allowed ...string) {
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	v.add("Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: [%s]",
		value, path, strings.Join(allowed, ", "))
}

func (v violations) err() *apiError {
	switch len(v) {
	case 0:
		return nil
	case 1:
		return validationError("1 validation error detected: %s", v[0])
	default:
		return validationError("%d validation errors detected: %s", len(v), strings.Join(v, "; "))
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

// serializationError is what AWS answers when a body is not the JSON the operation takes.
func serializationError(err error) *apiError {
	return errorf(http.StatusBadRequest, "SerializationException", "Could not parse request body: %v", err)
}
