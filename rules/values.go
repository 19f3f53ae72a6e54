package rules

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Value parsing the way the clients parse: ConfigDef.parseType for Java
// (values are trimmed first; INT/SHORT/LONG by Integer/Short/Long.parseX,
// BOOLEAN only "true"/"false" ignoring case, DOUBLE by Double.parseDouble) and
// rd_kafka_anyconf_set_prop0 for librdkafka.

var (
	errNotNumber = errors.New("not a number")
	errRange     = errors.New("out of range for its type")
)

// parseJavaInt parses an INT (bits 32), SHORT (16) or LONG (64) value.
func parseJavaInt(s string, bits int) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, "_") {
		return 0, errNotNumber
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, errRange
		}
		return 0, errNotNumber
	}
	return n, nil
}

// parseJavaDouble parses a DOUBLE like Double.parseDouble, which also takes a
// trailing d/D/f/F type suffix.
func parseJavaDouble(s string) (float64, error) {
	s = strings.TrimSpace(s)
	t := strings.TrimRight(s, "dDfF")
	if t == "" || strings.ContainsAny(t, "_") || len(s)-len(t) > 1 {
		return 0, errNotNumber
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, errNotNumber
	}
	return f, nil
}

// parseJavaBool accepts "true" and "false" in any case, nothing else
// (ConfigDef: "Expected value to be either true or false").
func parseJavaBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errNotNumber
}

// parseLibBool accepts what librdkafka's boolean properties accept.
func parseLibBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "t", "1":
		return true, nil
	case "false", "f", "0":
		return false, nil
	}
	return false, errNotNumber
}

// intBits is the width of a ConfigDef integer type (0 for other types).
func intBits(typ string) int {
	switch typ {
	case "INT":
		return 32
	case "SHORT":
		return 16
	case "LONG":
		return 64
	}
	return 0
}

// noun says what kind of number a key wants, for messages:
// `connections.max.idle.ms: "9m" is not a number of milliseconds`.
func noun(key string) string {
	switch {
	case strings.HasSuffix(key, ".ms"):
		return "a number of milliseconds"
	case strings.HasSuffix(key, ".bytes"), key == "batch.size", key == "buffer.memory", key == "max.request.size":
		return "a number of bytes"
	case strings.HasSuffix(key, ".seconds"):
		return "a number of seconds"
	case strings.HasSuffix(key, ".kbytes"):
		return "a number of kilobytes"
	}
	return "a whole number"
}

// fmtNum prints a validator bound without a useless ".0".
func fmtNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e18 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// rangeText describes a validator's bounds: "at least 0", "between 1 and 17".
func rangeText(hasMin, hasMax bool, lo, hi float64) string {
	switch {
	case hasMin && hasMax:
		return "between " + fmtNum(lo) + " and " + fmtNum(hi)
	case hasMin:
		return "at least " + fmtNum(lo)
	case hasMax:
		return "at most " + fmtNum(hi)
	}
	return ""
}
