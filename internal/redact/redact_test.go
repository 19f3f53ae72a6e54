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
		{"flag then another flag", []string{"x", "--password", "--verbose"}, []string{"x", "--password", "--verbose"}},
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

// FuzzValue checks that a secret planted as a key's value never survives.
func FuzzValue(f *testing.F) {
	f.Add("--sasl.password=", "Hunter2")
	f.Add(`x required password="`, `a\"b`)
	f.Add("https://u:", "p@h")
	f.Fuzz(func(t *testing.T, prefix, secret string) {
		got := Value(prefix + secret)
		if len(got) > 4*len(prefix+secret)+64 {
			t.Fatalf("Value grew %q to %q", prefix+secret, got)
		}
		if strings.HasSuffix(prefix, "password=") && !strings.ContainsAny(prefix, " \t\"'") && strings.HasPrefix(prefix, "-") {
			if want := prefix + Mask; got != want {
				t.Fatalf("Value(%q) = %q, want %q", prefix+secret, got, want)
			}
		}
	})
}
