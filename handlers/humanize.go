package handlers

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hyperops/hyperops/ops"
)

// money renders dollars with thousands separators: cents below $10,000, whole dollars above.
func money(f float64) string {
	f = math.Abs(f)
	if f >= 10000 {
		return "$" + thousands(strconv.FormatFloat(math.Round(f), 'f', 0, 64))
	}
	whole, cents, _ := strings.Cut(strconv.FormatFloat(f, 'f', 2, 64), ".")
	return "$" + thousands(whole) + "." + cents
}

// signedMoney is money with a + or − in front.
func signedMoney(f float64) string {
	if f < 0 {
		return "−" + money(f)
	}
	return "+" + money(f)
}

func thousands(digits string) string {
	n := len(digits)
	if n <= 3 {
		return digits
	}
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (n-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// count renders an integer with thousands separators.
func count(n int64) string {
	if n < 0 {
		return "−" + thousands(strconv.FormatInt(-n, 10))
	}
	return thousands(strconv.FormatInt(n, 10))
}

// plural renders "1 approval", "2 approvals".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return count(n) + " " + many
}

// duration renders a duration the way people say it: "12 h", "1 h 30 min", "45 min", "20 s", "3 days".
func duration(d time.Duration) string { return ops.SayDuration(d) }

// hours renders a number of hours as a duration.
func hours(h float64) string { return duration(time.Duration(h * float64(time.Hour))) }

// joinWords joins "a", "b" and "c" as "a, b and c".
func joinWords(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// phrase turns a kebab-case name into words: "awaiting-approval" → "awaiting approval".
func phrase(s string) string { return strings.ReplaceAll(s, "-", " ") }
