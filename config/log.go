package config

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Sources of a File other than a configuration file of its dialect
// (File.Source).
const (
	// SourceLog is the Java client's "ProducerConfig values:" block in an
	// application log: the effective configuration, defaults included.
	SourceLog = "log"
)

// producerBlockRE finds the first line of the block AbstractConfig.logAll
// writes: the class's simple name, " values: ", then Utils.NL
// (apache/kafka clients/.../common/config/AbstractConfig.java, logAll; the
// same on 3.9 and trunk). What the log layout puts before it (a timestamp,
// the level, the thread) varies.
var producerBlockRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bProducerConfig values: ?$`) })

// kafkaVersionRE is AppInfoParser.AppInfo's "Kafka version: {}" line, logged
// when the producer is created, right after its config block.
var kafkaVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bKafka version: ([0-9]+\.[0-9]+[0-9A-Za-z.\-]*)`) })

// IsProducerLog reports whether src holds a "ProducerConfig values:" block.
func IsProducerLog(src string) bool {
	for i := strings.Index(src, "ProducerConfig values:"); i >= 0; {
		end := strings.IndexAny(src[i:], "\r\n")
		if end < 0 {
			end = len(src) - i
		}
		start := strings.LastIndexByte(src[:i], '\n') + 1
		if producerBlockRE().MatchString(strings.TrimRight(src[start:i+end], " ")) {
			return true
		}
		j := strings.Index(src[i+1:], "ProducerConfig values:")
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// ParseProducerLog reads every "ProducerConfig values:" block of a Java
// application's log, one File per block (one per producer the application
// created), in the log's order. Each block is what AbstractConfig.logAll
// writes: after the header line, one line per config, sorted by key, as a
// tab, the key, " = ", and the value's Java toString(); the block ends at the
// first line that does not start with a tab. Every config of the producer is
// there, defaults included: the File is the effective configuration
// (Source is SourceLog), Dialect Java.
//
// Values are turned back into what a properties file would say: a LIST
// ([b1:9092, b2:9092]) is b1:9092,b2:9092, a CLASS (class
// org.apache.kafka...StringSerializer) the class name, and a null value
// (no value and no default) leaves the key out; RawValue keeps the logged
// text. A PASSWORD is logged as [hidden] (Password.toString) and kept so.
// The "Kafka version: X" line AppInfoParser logs after the block sets the
// File's KafkaVersion.
//
// Positions are exact: the key at column 2 (after the tab), the value after
// " = ", the File's Origin at the header line (where findings about the
// block as a whole go).
func ParseProducerLog(name, src string) []*File {
	var files []*File
	var cur *File
	lineNo := 0
	for len(src) > 0 || cur != nil {
		var line string
		if len(src) == 0 {
			if cur != nil {
				files = append(files, cur)
			}
			break
		}
		if i := strings.IndexByte(src, '\n'); i >= 0 {
			line, src = src[:i], src[i+1:]
		} else {
			line, src = src, ""
		}
		lineNo++
		line = strings.TrimSuffix(line, "\r")
		if cur != nil {
			if strings.HasPrefix(line, "\t") {
				if e, ok := logEntry(line, lineNo); ok {
					cur.Entries = append(cur.Entries, e)
				}
				continue
			}
			files = append(files, cur)
			cur = nil
		}
		if m := kafkaVersionRE().FindStringSubmatch(line); m != nil && len(files) > 0 && files[len(files)-1].KafkaVersion == "" {
			files[len(files)-1].KafkaVersion = m[1]
		}
		if producerBlockRE().MatchString(strings.TrimRight(line, " ")) {
			col := utf8.RuneCountInString(line[:strings.Index(line, "ProducerConfig values:")]) + 1
			cur = &File{Path: name, Dialect: Java, Source: SourceLog, Origin: posAt(lineNo, col)}
		}
	}
	return files
}

// logEntry reads one "\tkey = value" line of a block.
func logEntry(line string, lineNo int) (Entry, bool) {
	body := line[1:]
	i := strings.Index(body, " = ")
	if i <= 0 {
		return Entry{}, false
	}
	key, val := body[:i], body[i+3:]
	e := Entry{Key: key, RawKey: key, Value: val,
		KeyPos:   posAt(lineNo, 2),
		ValuePos: posAt(lineNo, 2+utf8.RuneCountInString(key)+3)}
	switch {
	case val == "null":
		return Entry{}, false // no value, and no default
	case val == "[hidden]":
		// A PASSWORD: the log hides it; keep it as logged.
	case strings.HasPrefix(val, "[") && strings.HasSuffix(val, "]"):
		// A LIST: AbstractList.toString, "[a, b]".
		items := strings.Split(val[1:len(val)-1], ", ")
		e.Value, e.RawValue = strings.Join(items, ","), val
	case strings.HasPrefix(val, "class "):
		// A CLASS: Class.toString, "class a.b.C" (or "interface a.b.C").
		e.Value, e.RawValue = strings.TrimPrefix(val, "class "), val
	case strings.HasPrefix(val, "interface "):
		e.Value, e.RawValue = strings.TrimPrefix(val, "interface "), val
	}
	return e, true
}
