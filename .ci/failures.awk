# The output of each failing test of a `go test -v` log: for every
# "--- FAIL: name" line, the last 80 lines the test printed (its t.Error and
# t.Log lines) before it. go test -v marks whose output follows with
# "=== RUN", "=== CONT" or "=== NAME" lines.
/^=== (RUN|CONT|NAME) / { cur = $3; next }
/^=== PAUSE / { next }
/^(ok|FAIL|PASS|\?)([ \t]|$)/ { cur = ""; next }
/^[ \t]*--- (PASS|SKIP): / { next }
/^[ \t]*--- FAIL: / {
	name = $3
	print "--- FAIL: " name " " $4
	first = n[name] > 80 ? n[name] - 80 : 0
	for (i = first; i < n[name]; i++) print "    | " line[name, i % 80]
	next
}
cur != "" { line[cur, n[cur] % 80] = $0; n[cur]++ }
