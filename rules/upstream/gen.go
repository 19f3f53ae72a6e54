//go:build ignore

// gen writes librdkafka-properties.tsv from librdkafka's src/rdkafka_conf.c:
// every entry of its rd_kafka_properties[] table, which is what
// rd_kafka_conf_set looks a name up in before it says "No such
// configuration property". CONFIGURATION.md leaves out the hidden entries
// (metadata.request.timeout.ms, enable.sparse.connections) and the two
// Java names librdkafka catches with its own message (ssl.truststore.location,
// sasl.jaas.config), so the table is read from the source.
//
//	go run rules/upstream/gen.go path/to/librdkafka/src/rdkafka_conf.c VERSION > rules/upstream/librdkafka-properties.tsv
//
// Columns: name; scope (global or topic); cp (C consumer only, P producer
// only, * both); kind: set (rd_kafka_conf_set takes it), alias (of the
// property in the last column), callback (a pointer set only through its
// rd_kafka_conf_set_..._cb() function: "must be set through dedicated
// .._set_..() function"), internal ("not settable") or invalid (refused
// with the message in the last column).
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run gen.go rdkafka_conf.c VERSION")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	src := string(b)
	i := strings.Index(src, "rd_kafka_properties[] = {")
	if i < 0 {
		fmt.Fprintln(os.Stderr, "no rd_kafka_properties[] table")
		os.Exit(1)
	}
	src = src[i:]
	// {SCOPE FLAGS, "name", _RK_C_TYPE, ...}: the entry's text runs to its
	// closing brace (no brace is written inside an entry).
	ent := regexp.MustCompile(`\{\s*(_RK_[A-Z_|\s]+?),\s*"([A-Za-z0-9_.]+)",\s*(_RK_C_[A-Z0-9]+)([^}]*)\}`)
	str := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	sdef := regexp.MustCompile(`\.sdef\s*=\s*"([^"]*)"`)
	fmt.Printf("# librdkafka %s src/rdkafka_conf.c rd_kafka_properties[], written by rules/upstream/gen.go\n", os.Args[2])
	fmt.Println("name\tscope\tcp\tkind\tdetail")
	for _, m := range ent.FindAllStringSubmatch(src, -1) {
		flags, name, typ := m[1], m[2], m[3]
		scope := "global"
		if strings.Contains(flags, "_RK_TOPIC") {
			scope = "topic"
		}
		cp := "*"
		switch {
		case strings.Contains(flags, "_RK_CONSUMER") || strings.Contains(flags, "_RK_CGRP"):
			cp = "C"
		case strings.Contains(flags, "_RK_PRODUCER"):
			cp = "P"
		}
		// An invalid entry's strings are its description only.
		var desc strings.Builder
		for _, s := range str.FindAllStringSubmatch(m[4], -1) {
			desc.WriteString(s[1])
		}
		kind, detail := "set", ""
		switch typ {
		case "_RK_C_ALIAS":
			kind = "alias"
			if s := sdef.FindStringSubmatch(m[4]); s != nil {
				detail = s[1]
			}
		case "_RK_C_PTR":
			if !strings.Contains(flags, "_RK_HIDDEN") {
				kind = "callback"
			}
		case "_RK_C_INTERNAL":
			kind = "internal"
		case "_RK_C_INVALID":
			kind, detail = "invalid", desc.String()
		}
		fmt.Printf("%s\t%s\t%s\t%s\t%s\n", name, scope, cp, kind, detail)
	}
}
