package rules

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// javaClientsDir finds shared/java-clients, the kafka-clients jars built
// from apache/kafka's tags, in a directory above the module (../shared
// beside the main checkout, ../../shared beside a worktree under wt/).
func javaClientsDir() string {
	dir, err := filepath.Abs(".")
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, "shared", "java-clients")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Join("..", "..", "shared", "java-clients")
		}
		dir = parent
	}
}

// TestJava21CatalogMatchesJar runs upstream/ConfigDump.java against the
// real kafka-clients 2.1.1 jar and requires its rows to be
// upstream/java-producer-2.1.tsv's, which java-configs.sh made from the
// 2.1.1 source: the 2.1 catalog lint checks a 2.1 client with is that
// client's own ConfigDef.
func TestJava21CatalogMatchesJar(t *testing.T) {
	jar := filepath.Join(javaClientsDir(), "kafka-clients-2.1.1.jar")
	if _, err := os.Stat(jar); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not present", jar)
	}
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	if err1 != nil || err2 != nil {
		t.Skip("javac/java not on PATH: apt-get install default-jdk-headless")
	}
	slf4j := "/usr/share/java/slf4j-api.jar"
	if _, err := os.Stat(slf4j); err != nil {
		t.Skip("no " + slf4j + ": apt-get install libslf4j-java")
	}
	dir := t.TempDir()
	cp := jar + string(os.PathListSeparator) + slf4j
	if out, err := exec.Command(javac, "-nowarn", "-cp", cp, "-d", dir, filepath.Join("upstream", "ConfigDump.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	out, err := exec.Command(java, "-cp", dir+string(os.PathListSeparator)+cp, "ConfigDump").Output()
	if err != nil {
		t.Fatalf("java ConfigDump: %v", err)
	}
	table, err := java2FS.ReadFile("upstream/java-producer-2.1.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(table), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "name\t") {
			want = append(want, line)
		}
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("upstream/java-producer-2.1.tsv vs the 2.1.1 jar's ConfigDef (-table +jar):\n%s", diff)
	}
	if len(got) < 60 {
		t.Errorf("the jar gave %d configs", len(got))
	}
}

// TestJava2Catalogs checks the rows of the 2.x tables the rules rest on.
func TestJava2Catalogs(t *testing.T) {
	v21, _ := ParseVersion("2.1")
	v28, _ := ParseVersion("2.8")
	tests := []struct {
		key      string
		v        Version
		def      string
		hasDef   bool
		enum     []string
		typ      string
		wantHere bool
	}{
		{"client.dns.lookup", v21, "default", true, []string{"default", "use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"}, "STRING", true},
		{"client.dns.lookup", v28, "use_all_dns_ips", true, []string{"default", "use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"}, "STRING", true},
		{"acks", v21, "1", true, []string{"all", "-1", "0", "1"}, "STRING", true},
		{"enable.idempotence", v21, "false", true, nil, "BOOLEAN", true},
		{"linger.ms", v21, "0", true, nil, "INT", true},
		{"linger.ms", v28, "0", true, nil, "LONG", true},
		{"socket.connection.setup.timeout.ms", v21, "", false, nil, "", false},
	}
	for _, tt := range tests {
		s, ok := javaSettingAt(tt.key, tt.v)
		if ok != tt.wantHere {
			t.Errorf("%s in %s: present %v, want %v", tt.key, tt.v, ok, tt.wantHere)
			continue
		}
		if !ok {
			continue
		}
		d, has := s.Default(tt.v)
		if d != tt.def || has != tt.hasDef || s.Type != tt.typ || !cmp.Equal(s.Enum, tt.enum) {
			t.Errorf("%s in %s: default %q (%v), type %s, enum %v", tt.key, tt.v, d, has, s.Type, s.Enum)
		}
	}
	if got := javaKeyHistory("socket.connection.setup.timeout.ms"); got != "2.7" {
		t.Errorf("socket.connection.setup.timeout.ms first in %q, want 2.7", got)
	}
}
