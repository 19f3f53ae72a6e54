package redact

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArgs(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"flag with equals", []string{"app", "--sasl.password=Hunter2"}, []string{"app", "--sasl.password=" + Mask}},
		{"java system property", []string{"java", "-Djavax.net.ssl.keyStorePassword=s3cr3t", "-jar", "app.jar"},
			[]string{"java", "-Djavax.net.ssl.keyStorePassword=" + Mask, "-jar", "app.jar"}},
		{"flag then value", []string{"kcat", "--password", "pw", "-b", "h:9092"}, []string{"kcat", "--password", Mask, "-b", "h:9092"}},
		// Nothing tells a password that starts with a dash from a flag:
		// the next argument is masked whatever it is.
		{"flag then a value with a dash", []string{"x", "--sasl-password", "-hunter4", "-b", "h:9092"}, []string{"x", "--sasl-password", Mask, "-b", "h:9092"}},
		{"flag then another flag", []string{"x", "--password", "--verbose"}, []string{"x", "--password", Mask}},
		{"flag last", []string{"x", "--password"}, []string{"x", "--password"}},
		{"environment style", []string{"env", "KAFKA_SASL_SECRET=abc", "KAFKA_BOOTSTRAP=b:9092"}, []string{"env", "KAFKA_SASL_SECRET=" + Mask, "KAFKA_BOOTSTRAP=b:9092"}},
		{"jaas config", []string{`-Dsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="Esc\"aped";`},
			[]string{`-Dsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + Mask + `";`}},
		{"jaas single quotes", []string{`sasl.jaas.config=X required username='u' password='p w';`}, []string{`sasl.jaas.config=X required username='u' password='` + Mask + `';`}},
		{"url user info", []string{"--schema-registry=https://bob:pa55@sr:8081/x"}, []string{"--schema-registry=https://bob:" + Mask + "@sr:8081/x"}},
		{"url without password", []string{"http://bob@h/", "ftp://h:21/"}, []string{"http://bob@h/", "ftp://h:21/"}},
		{"working directory is no secret", []string{"PWD=/home/x", "--client.id=pay"}, []string{"PWD=/home/x", "--client.id=pay"}},
		{"token and credential", []string{"--oauth-token=t", "--aws-credentials", "c"}, []string{"--oauth-token=" + Mask, "--aws-credentials", Mask}},
		{"unclosed quote", []string{`x password="abc`}, []string{`x password="` + Mask}},
		{"empty value", []string{"--password="}, []string{"--password=" + Mask}},
		// A shell reads ""hunter5 as hunter5 and 'x'hunter6 as xhunter6:
		// the whole word is the value, whatever its quoting.
		{"empty quotes then the value", []string{`--sasl.password=""hunter5`}, []string{"--sasl.password=" + Mask}},
		{"quoted then unquoted", []string{`--sasl.password='x'hunter6`}, []string{"--sasl.password=" + Mask}},
		{"unquoted then quoted", []string{`--sasl.password=x'hunter7'`, `--sasl.password=a"b c"d`}, []string{"--sasl.password=" + Mask, "--sasl.password=" + Mask}},
		{"a lone quote", []string{`-password="`}, []string{`-password="` + Mask}},
		{"quoted", []string{`--password="p w"`, `--password='p'`}, []string{`--password="` + Mask + `"`, `--password='` + Mask + `'`}},
		{"value with blanks and semicolons", []string{"--password=a b", "--password=a;b", `--password="a" b`}, []string{"--password=" + Mask, "--password=" + Mask, "--password=" + Mask}},
		{"in a shell script", []string{"sh", "-c", `kcat --sasl.password=""hunter5 -X sasl.password='x'hunter6 -X sasl.username=u; exec app password=a"b c"d`},
			[]string{"sh", "-c", `kcat --sasl.password=` + Mask + ` -X sasl.password=` + Mask + ` -X sasl.username=u; exec app password=` + Mask}},
		{"comma in a script", []string{"sh", "-c", "app --password=ab,cd --v"}, []string{"sh", "-c", "app --password=" + Mask + " --v"}},
		{"escaped blank in a script", []string{`sh -c app --password=a\ b --v`}, []string{`sh -c app --password=` + Mask + ` --v`}},
		{"jaas quotes run on", []string{`-Dsasl.jaas.config=X required password=""hunter5 username="u";`},
			[]string{`-Dsasl.jaas.config=X required password=` + Mask + ` username="u";`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string(nil), tt.in...)
			got := Args(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Args(%q) (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(in, tt.in); diff != "" {
				t.Errorf("Args changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestAssignments(t *testing.T) {
	tests := []struct {
		name, in string
		o        Assign
		want     string
	}{
		{"shell word with a comma", "app --password=ab,cd --v", Assign{Secret: IsSecretName, Shell: true}, "app --password=" + Mask + " --v"},
		{"a comma ends a value in text", "password=ab,user=u", Assign{Secret: IsSecretName}, "password=" + Mask + ",user=u"},
		{"reference kept before a comma", "ssl.key.password=${env:P}, or a placeholder", Assign{Secret: IsSecretName, KeepRefs: true},
			"ssl.key.password=${env:P}, or a placeholder"},
		{"quotes run on in text", `password: ''x'' user: u`, Assign{Secret: IsSecretName, Colon: true}, "password: " + Mask + " user: u"},
		{"one quoted string keeps its quotes", `password="p" user="u"`, Assign{Secret: IsSecretName}, `password="` + Mask + `" user="u"`},
	}
	for _, tt := range tests {
		if got := Assignments(tt.in, tt.o); got != tt.want {
			t.Errorf("%s: Assignments(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestCmdline(t *testing.T) {
	got := Cmdline([]string{"java", "-Dssl.key.password=k", "Main"})
	if want := "java -Dssl.key.password=" + Mask + " Main"; got != want {
		t.Errorf("Cmdline = %q, want %q", got, want)
	}
}

func TestLine(t *testing.T) {
	in := `java -Dsasl.jaas.config=X required username="u" password="p"; --password pw -jar a.jar`
	want := `java -Dsasl.jaas.config=X required username="u" password="` + Mask + `"; --password ` + Mask + ` -jar a.jar`
	if got := Line(in); got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
	if got := Line(want); got != want {
		t.Errorf("Line of a masked line = %q, want it unchanged", got)
	}
}

func TestIsSecretName(t *testing.T) {
	for _, n := range []string{"ssl.key.password", "SASL_PASSWORD", "keyStorePassword", "sasl-secret", "api_key", "ApiKey", "oauth.token", "ssl.keystore.passphrase"} {
		if !IsSecretName(n) {
			t.Errorf("IsSecretName(%q) = false, want true", n)
		}
	}
	for _, n := range []string{"bootstrap.servers", "PWD", "client.id", "sasl.mechanism", "key.serializer"} {
		if IsSecretName(n) {
			t.Errorf("IsSecretName(%q) = true, want false", n)
		}
	}
}

// FuzzValue checks that a secret planted as a key's value never survives:
// as the whole value of an argument (--password=SECRET), and as one shell
// word inside a longer one (sh -c "app password=SECRET --v").
func FuzzValue(f *testing.F) {
	f.Add("--sasl.password=", "Hunter2")
	f.Add(`x required password="`, `a\"b`)
	f.Add("https://u:", "p@h")
	// testdata/fuzz/FuzzValue holds the inputs that got past it.
	f.Add("-password=", `"`)
	f.Add("--sasl.password=", `""hunter5`)
	f.Add("--sasl.password=", `'x'hunter6`)
	f.Fuzz(func(t *testing.T, prefix, secret string) {
		got := Value(prefix + secret)
		if len(got) > 4*len(prefix+secret)+64 {
			t.Fatalf("Value grew %q to %q", prefix+secret, got)
		}
		// The argument's key says secret: what follows "=" is masked
		// whole (a value that is one quoted string, then semicolons,
		// keeps its quotes and semicolons).
		if k, v, ok := strings.Cut(prefix+secret, "="); ok && !strings.ContainsAny(k, " \t\"'") && IsSecretName(strings.TrimLeft(k, "-")) {
			rest := got[len(k)+1:]
			if !strings.HasPrefix(got, k+"=") || !maskedWord(strings.TrimRight(rest, ";"), v) {
				t.Fatalf("Value(%q) = %q, want %s= and the value masked", prefix+secret, got, k)
			}
		}
		// One shell word (no blank or ';' in it) after password= inside a
		// longer text.
		word := strings.Map(func(r rune) rune {
			if strings.ContainsRune(" \t\n\r\f\v;", r) {
				return -1
			}
			return r
		}, secret)
		if word == "" {
			return // blanks after "=" are skipped to the next word
		}
		in := "app password=" + word + " --next"
		got = Value(in)
		rest, ok := strings.CutPrefix(got, "app password=")
		if !ok || !maskedWord(strings.TrimSuffix(rest, " --next"), word) {
			t.Fatalf("Value(%q) = %q, want the word after password= masked", in, got)
		}
	})
}

// maskedWord reports whether got is what the value word may become: the
// mask, the mask in the word's quotes, or the word itself when it holds
// nothing to mask ("", "" or ”, a mask already).
func maskedWord(got, word string) bool {
	switch got {
	case Mask, `"` + Mask + `"`, `'` + Mask + `'`, `"` + Mask, `'` + Mask:
		return true
	}
	return got == word && strings.Trim(strings.TrimSuffix(word, Mask), `"';`) == ""
}
