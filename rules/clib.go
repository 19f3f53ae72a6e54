package rules

import (
	"math"
	"strconv"
	"strings"
)

// How librdkafka reads numbers: rd_kafka_anyconf_set_prop
// (confluentinc/librdkafka src/rdkafka_conf.c) reads an integer property with
// ival = (int)strtol(value, &end, 0) and fails only when end == value
// (nothing parsed: "Invalid value for configuration property"), then checks
// ival against the property's range ("value %i is outside allowed range");
// a float property the same way with strtod. So "0x7530" is 30000, "010" is
// octal 8, "9m" is 9 (the rest is ignored, silently), and a number past the
// range of int wraps through the cast.

// cSpace is C isspace in the "C" locale: what strtol and strtod skip first.
func cSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// strtol is C strtol(s, &end, 0) with a 64-bit long (glibc on LP64): n is
// how many bytes it consumed (0 when it parsed nothing), base the base it
// read (8 for a leading 0, 16 for 0x), and a value past the range of long
// is clamped to LONG_MAX or LONG_MIN, as strtol does (with ERANGE).
func strtol(s string) (v int64, n, base int) {
	i := 0
	for i < len(s) && cSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base = 10
	start := i
	switch {
	case i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && hexDigit(s[i+2]) >= 0:
		base, i = 16, i+2
		start = i
	case i < len(s) && s[i] == '0':
		base = 8
	}
	var u uint64
	over := false
	j := i
	for ; j < len(s); j++ {
		d := hexDigit(s[j])
		if d < 0 || d >= base {
			break
		}
		if u > (math.MaxUint64-uint64(d))/uint64(base) {
			over = true
		}
		u = u*uint64(base) + uint64(d)
	}
	if j == start {
		return 0, 0, 10 // no digits: strtol sets end to s
	}
	switch {
	case neg && (over || u > 1<<63):
		v = math.MinInt64
	case neg:
		v = -int64(u)
	case over || u > math.MaxInt64:
		v = math.MaxInt64
	default:
		v = int64(u)
	}
	return v, j, base
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// strtod is the decimal part of C strtod(s, &end): optional blanks and
// sign, digits with an optional point, an optional exponent. n is how many
// bytes it consumed, 0 when it parsed nothing. (strtod also reads hex floats,
// inf and nan, which no one writes in a configuration file; they count as
// nothing parsed here.)
func strtod(s string) (f float64, n int) {
	i := 0
	for i < len(s) && cSpace(s[i]) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			i = j
		}
	}
	f, _ = strconv.ParseFloat(s[start:i], 64)
	return f, i
}

// libIntRead is how librdkafka reads an integer property's value.
type libIntRead struct {
	// ok is false when strtol parsed nothing.
	ok bool
	// val is the int librdkafka stores: strtol's long cast to int.
	val int64
	// long is strtol's result before the cast; wrapped says the cast
	// changed it.
	long    int64
	wrapped bool
	// base is 8 or 16 when the value was read as octal or hex.
	base int
	// rest is the text after the number, which librdkafka ignores.
	rest string
}

func readLibInt(s string) libIntRead {
	v, n, base := strtol(s)
	if n == 0 {
		return libIntRead{}
	}
	iv := int64(int32(v))
	return libIntRead{ok: true, val: iv, long: v, wrapped: iv != v, base: base, rest: strings.TrimRight(s[n:], " \t")}
}
