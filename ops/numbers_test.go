package ops

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestMulCountRefusesOverflow(t *testing.T) {
	tests := []struct {
		a, b int64
		want int64
		ok   bool
	}{
		{4, 8, 32, true},
		{0, math.MaxInt64, 0, true},
		{math.MaxInt32, math.MaxInt32, math.MaxInt32 * math.MaxInt32, true},
		{1 << 62, 4, 0, false}, // wraps to 0
		{3037000500, 3037000500, 0, false},
		{-1, math.MinInt64, 0, false},
		{math.MinInt64, -1, 0, false},
	}
	for _, tt := range tests {
		got, ok := MulCount(tt.a, tt.b)
		if got != tt.want || ok != tt.ok {
			t.Errorf("MulCount(%d, %d) = %d, %v; want %d, %v", tt.a, tt.b, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNumbersAreCapped(t *testing.T) {
	specs := []ParamSpec{
		{Name: "replicas", Kind: KindInt, Help: "pods"},
		{Name: "port", Kind: KindInt, Min: 1, Max: 65535, Help: "port"},
		{Name: "deadline", Kind: KindDuration, Help: "deadline"},
		{Name: "timeout", Kind: KindDuration, MaxDuration: "30m", Help: "timeout"},
		{Name: "size", Kind: KindQuantity, MaxQuantity: "16Ti", Help: "size"},
		{Name: "memory", Kind: KindQuantity, Help: "memory"},
	}
	tests := []struct {
		field string
		value any
		has   string // "" = accepted
	}{
		{"replicas", "2147483647", ""},
		{"replicas", "2147483648", "above the largest value"},
		{"replicas", "9223372036854775808", "whole number"},
		{"replicas", float64(1 << 53), "above the largest value"},
		{"replicas", "-1", "negative"},
		{"port", "0", "below 1"},
		{"port", "65536", "at most 65535"},
		{"deadline", "2147483647s", ""},
		{"deadline", "4294967297s", "longer than the longest"},
		{"deadline", "9999999999999h", "longer than the longest"},
		{"deadline", float64(1e300), "longer than the longest"},
		{"deadline", "1e999", "longer than the longest"},
		{"deadline", "-1e999", "positive"},
		{"deadline", "NaN", "not a number of hours"},
		{"deadline", "soon", "not a duration"},
		{"timeout", "30m", ""},
		{"timeout", "31m", "at most 30m0s"},
		{"size", "16Ti", ""},
		{"size", "17Ti", "above the largest size (16Ti)"},
		{"memory", "1Ei", ""},
		{"memory", "2Ei", "above the largest memory"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s=%v", tt.field, tt.value), func(t *testing.T) {
			_, err := Normalize(specs, map[string]any{tt.field: tt.value})
			if tt.has == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Field != tt.field || e.Next == "" {
				t.Fatalf("want E_INVALID_ARGUMENT on %s with a next step, got %v", tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.has) {
				t.Fatalf("error %q lacks %q", err, tt.has)
			}
		})
	}
}

func TestErrorListsAreCapped(t *testing.T) {
	raw := map[string]any{}
	for i := range 10000 {
		raw[fmt.Sprintf("word%05d", i)] = "x"
	}
	_, err := Normalize(trainSpecs, raw)
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("want Errors, got %v", err)
	}
	// 10,000 unknown arguments and the missing name: the first 20, then one entry counting the other 9,981.
	if len(es) != MaxErrors+1 {
		t.Fatalf("want %d entries, got %d", MaxErrors+1, len(es))
	}
	if last := es[MaxErrors]; last.Message != "…and 9981 more problems" || last.Next == "" || last.Omitted != 9981 || last.Count() != 9981 {
		t.Fatalf("last entry = %+v", last)
	}
	if again := es.Capped(); len(again) != len(es) || again[MaxErrors].Message != es[MaxErrors].Message {
		t.Fatalf("capping twice changed the list: %v", again)
	}
	if n := len(err.Error()); n > 10000 {
		t.Fatalf("the capped list is %d bytes", n)
	}
}

func TestEchoShortensWhatIsRepeatedBack(t *testing.T) {
	long := strings.Repeat("é", 10000)
	_, err := Normalize(trainSpecs, map[string]any{long: "x", "name": "a"})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want an error, got %v", err)
	}
	if n := len([]rune(e.Message)); n > 2*maxEcho {
		t.Fatalf("message repeats %d characters of the key", n)
	}
	if n := len([]rune(e.Field)); n > maxEcho {
		t.Fatalf("field is %d characters", n)
	}
}
