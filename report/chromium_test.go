package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromiumFlags keep headless Chromium off the network and out of the
// user's profile: nothing to fetch, nothing to sync.
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"}

func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not installed (apt-get install chromium): the HTML report is not checked in a browser")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir())
	cmd := exec.CommandContext(ctx, bin, append(all, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestChromiumDrawsChart opens the report of the fixed recording in headless
// Chromium, checks in the DOM it rendered that the chart's two polylines are
// there with points, and takes a screenshot (written to docs/report.png
// when KDIAG_SCREENSHOT names that path).
func TestChromiumDrawsChart(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := HTML(&buf, load(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(runChromium(t, bin, "--dump-dom", "file://"+page))
	re := regexp.MustCompile(`<polyline class="(cw|est)"[^>]*points="([^"]*)"`)
	found := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(dom, -1) {
		found[m[1]] = len(strings.Fields(m[2]))
	}
	want := len(load(t).Analysis.Processes[0].Points)
	if found["cw"] != want || found["est"] != want {
		t.Errorf("rendered DOM polylines: %v points, want %d each for cw and est", found, want)
	}
	if !strings.Contains(dom, "<svg") || !strings.Contains(dom, "CLOSE_WAIT (last 40, max 80)") {
		t.Errorf("rendered DOM lacks the chart or its legend")
	}

	shot := filepath.Join(dir, "report.png")
	if p := os.Getenv("KDIAG_SCREENSHOT"); p != "" {
		shot, _ = filepath.Abs(p)
	}
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars", "file://"+page)
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10_000 {
		t.Errorf("screenshot is not a PNG with content (%d bytes)", len(b))
	}
}
