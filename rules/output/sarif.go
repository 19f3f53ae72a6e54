package output

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"net/url"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/kdiag/kdiag/rules"
)

// SARIF 2.1.0 (OASIS, errata 01): https://docs.oasis-open.org/sarif/sarif/v2.1.0/
// The types below are the subset kdiag writes, named after the spec's
// objects (toolComponent §3.19, reportingDescriptor §3.49, result §3.27,
// physicalLocation §3.29); the log (§3.13) and its run (§3.14) are streamed
// around them, a result at a time.
const (
	sarifVersion = "2.1.0"
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	// srcRoot is the uriBaseId of relative paths: GitHub code scanning
	// resolves it to the checkout, so results link to the file.
	srcRoot = "%SRCROOT%"
	// fingerprintKey names kdiag's partialFingerprints entry; the "/v1"
	// lets a later scheme coexist (§3.27.17).
	fingerprintKey = "kdiagFinding/v1"
)

// The log (sarifLog §3.13) and its run (run §3.14) are written field by
// field by StreamSARIF, so that results stream: tool, results, then
// invocations, columnKind and originalUriBaseIds.

// sarifInvocation (§3.20) says whether the run covered every input; an input
// kdiag could not read is a toolExecutionNotification (§3.58), which GitHub
// shows on the tool's status page.
type sarifInvocation struct {
	ExecutionSuccessful        bool                `json:"executionSuccessful"`
	ToolExecutionNotifications []sarifNotification `json:"toolExecutionNotifications,omitempty"`
}

type sarifNotification struct {
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string            `json:"name"`
	Version        string            `json:"version"`
	InformationURI string            `json:"informationUri"`
	Rules          []sarifDescriptor `json:"rules"`
}

type sarifDescriptor struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name,omitempty"`
	ShortDescription     *sarifText      `json:"shortDescription,omitempty"`
	FullDescription      *sarifText      `json:"fullDescription,omitempty"`
	Help                 *sarifText      `json:"help,omitempty"`
	HelpURI              string          `json:"helpUri"`
	DefaultConfiguration sarifConfig     `json:"defaultConfiguration"`
	Properties           *sarifRuleProps `json:"properties,omitempty"`
}

// sarifText is a multiformatMessageString (§3.12) or a message (§3.11).
type sarifText struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

// sarifRuleProps is the rule's property bag as GitHub reads it: tags are
// shown and filterable; security-severity (a CVSS-like score as a string)
// makes GitHub treat the rule as a security rule and rank it critical,
// high, medium or low, so it is set only for secret rules.
type sarifRuleProps struct {
	Tags             []string `json:"tags,omitempty"`
	Precision        string   `json:"precision,omitempty"`
	SecuritySeverity string   `json:"security-severity,omitempty"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           *int              `json:"ruleIndex,omitempty"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints,omitempty"`
	Properties          *sarifResultProps `json:"properties,omitempty"`
}

type sarifResultProps struct {
	Key      string `json:"key,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	Fix      string `json:"fix,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// StreamSARIF writes a SARIF 2.1.0 log with one run, a result at a time.
// tool.driver.rules describes every rule of the catalog, in catalog order
// (the results come after it and are not held, so which rules fire is not
// known when it is written), and each result points at its rule by ruleId
// and ruleIndex; a result whose rule is not in the catalog has its ruleId
// only. Relative paths are written relative to %SRCROOT%, as GitHub code
// scanning expects, and %SRCROOT% is given in originalUriBaseIds when the
// base directory is known; a path outside it is an absolute file: URI,
// never one that climbs out with "../".
func StreamSARIF(w io.Writer, findings iter.Seq[rules.Finding], catalog []*rules.Rule, meta func() Meta) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	m0 := meta()
	descs := []sarifDescriptor{}
	ruleIndex := map[string]int{}
	for _, r := range catalog {
		if r == nil {
			continue
		}
		if _, dup := ruleIndex[r.ID]; !dup {
			ruleIndex[r.ID] = len(descs)
			descs = append(descs, describe(r))
		}
	}
	head, err := marshal(sarifTool{Driver: sarifDriver{
		Name:           "kdiag",
		Version:        m0.version(),
		InformationURI: InformationURI,
		Rules:          descs,
	}}, "      ")
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, "{\n  \"$schema\": %q,\n  \"version\": %q,\n  \"runs\": [\n    {\n      \"tool\": ", sarifSchema, sarifVersion)
	bw.Write(head)
	bw.WriteString(",\n      \"results\": [")
	// The fingerprint leaves out the line, so a finding keeps its identity
	// when lines are added above it; the occurrence count tells apart
	// equal findings in one file (findings come sorted by path, so the
	// counts of one file are dropped when the next file starts).
	seen := map[string]int{}
	curPath := ""
	enc := newMarshaler("        ")
	n := 0
	for f := range findings {
		f = scrub(f)
		if f.Path != curPath {
			clear(seen)
			curPath = f.Path
		}
		res := sarifResult{
			RuleID:    f.RuleID,
			Level:     level(f.Severity),
			Message:   sarifText{Text: f.Message},
			Locations: []sarifLocation{{PhysicalLocation: physical(f, m0.BaseDir)}},
		}
		if i, ok := ruleIndex[f.RuleID]; ok {
			res.RuleIndex = &i
		}
		fp := fingerprint(f)
		seen[fp]++
		res.PartialFingerprints = map[string]string{fingerprintKey: fmt.Sprintf("%s:%d", fp, seen[fp])}
		if f.Key != "" || f.Evidence != "" || f.Fix != "" {
			res.Properties = &sarifResultProps{Key: f.Key, Evidence: f.Evidence, Fix: f.Fix}
		}
		b, err := enc.marshal(res)
		if err != nil {
			return err
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n        ")
		bw.Write(b)
		n++
	}
	if n > 0 {
		bw.WriteString("\n      ")
	}
	bw.WriteString("],\n")
	m := meta()
	tail := sarifRunTail{
		Invocations: []sarifInvocation{invocation(m)},
		ColumnKind:  "unicodeCodePoints",
	}
	if base := baseURI(m.BaseDir); base != "" {
		tail.OriginalURIBaseIDs = map[string]sarifArtifact{srcRoot: {URI: base}}
	}
	b, err := marshal(tail, "    ")
	if err != nil {
		return err
	}
	bw.Write(b[2:]) // without "{\n": the fields go on in the run object, and its "}" closes it
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}

// sarifRunTail is what a run holds after its results.
type sarifRunTail struct {
	Invocations []sarifInvocation `json:"invocations"`
	ColumnKind  string            `json:"columnKind"`
	// OriginalURIBaseIDs says where %SRCROOT% is (§3.14.14): the
	// directory kdiag was run from, the checkout in CI.
	OriginalURIBaseIDs map[string]sarifArtifact `json:"originalUriBaseIds,omitempty"`
}

// baseURI is the file: URI of a directory, with the trailing slash SARIF
// requires of a base URI (§3.14.14); "" when the directory is not known.
func baseURI(dir string) string {
	if dir == "" || !filepath.IsAbs(dir) {
		return ""
	}
	p := filepath.ToSlash(dir)
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// level maps a severity to a SARIF result level (§3.27.10).
func level(s rules.Severity) string {
	switch s {
	case rules.Error:
		return "error"
	case rules.Warning:
		return "warning"
	}
	return "note"
}

// describe builds a rule's reportingDescriptor from the catalog value, the
// same value kdiag rules and docs/rules.md are written from.
func describe(r *rules.Rule) sarifDescriptor {
	d := sarifDescriptor{
		ID:                   r.ID,
		Name:                 ruleName(r.Title),
		HelpURI:              HelpURI(r.ID),
		DefaultConfiguration: sarifConfig{Level: level(r.Severity)},
	}
	if r.Title != "" {
		d.ShortDescription = &sarifText{Text: r.Title}
	}
	if r.Rationale != "" {
		d.FullDescription = &sarifText{Text: r.Rationale}
	}
	d.Help = &sarifText{Text: helpText(r), Markdown: helpMarkdown(r)}
	props := &sarifRuleProps{Tags: []string{"kafka", "producer-config"}, Precision: "very-high"}
	if r.Category != "" {
		props.Tags = append(props.Tags, r.Category)
	}
	if r.Category == "secrets" {
		props.Tags = append(props.Tags, "security")
		props.SecuritySeverity = securitySeverity(r.Severity)
	}
	d.Properties = props
	return d
}

// securitySeverity is GitHub's score: over 7.0 is high, 4.0 to 6.9 medium,
// 0.1 to 3.9 low. A password in clear in a repository is high.
func securitySeverity(s rules.Severity) string {
	switch s {
	case rules.Error:
		return "8.0"
	case rules.Warning:
		return "7.0"
	}
	return "4.0"
}

func helpText(r *rules.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", r.ID, r.Title)
	if r.Rationale != "" {
		fmt.Fprintf(&b, "\nWhy: %s\n", r.Rationale)
	}
	if r.Remediation != "" {
		fmt.Fprintf(&b, "\nFix: %s\n", r.Remediation)
	}
	if r.Source != "" {
		fmt.Fprintf(&b, "\nSource: %s\n", r.Source)
	}
	fmt.Fprintf(&b, "\nDocumentation: %s", HelpURI(r.ID))
	return b.String()
}

func helpMarkdown(r *rules.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s: %s**\n", r.ID, r.Title)
	if r.Rationale != "" {
		fmt.Fprintf(&b, "\n%s\n", r.Rationale)
	}
	if r.Remediation != "" {
		fmt.Fprintf(&b, "\n**Fix:** %s\n", r.Remediation)
	}
	if r.Source != "" {
		fmt.Fprintf(&b, "\n**Source:** %s\n", r.Source)
	}
	fmt.Fprintf(&b, "\n[%s in docs/rules.md](%s)", r.ID, HelpURI(r.ID))
	return b.String()
}

// ruleName turns a title into the PascalCase identifier SARIF's
// reportingDescriptor.name asks for (§3.49.7): "connections.max.idle.ms is
// negative" becomes "ConnectionsMaxIdleMsIsNegative".
func ruleName(title string) string {
	var b strings.Builder
	up := true
	for _, c := range title {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			up = true
			continue
		}
		if up {
			b.WriteRune(unicode.ToUpper(c))
			up = false
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// physical is a result's location: the artifact and, when known, the
// region. SARIF lines and columns are 1-based, like config.Pos.
func physical(f rules.Finding, base string) sarifPhysical {
	p := sarifPhysical{ArtifactLocation: artifact(f.Path, base)}
	if f.Pos.Line > 0 {
		p.Region = &sarifRegion{StartLine: int(f.Pos.Line)}
		if f.Pos.Col > 0 {
			p.Region.StartColumn = int(f.Pos.Col)
		}
	}
	return p
}

// invocation reports the inputs that could not be linted.
func invocation(meta Meta) sarifInvocation {
	inv := sarifInvocation{ExecutionSuccessful: len(meta.Problems) == 0}
	for _, p := range meta.Problems {
		n := sarifNotification{Level: "error", Message: sarifText{Text: p.Path + ": " + p.Message}}
		if p.Path != "" {
			n.Locations = []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: artifact(p.Path, meta.BaseDir)}}}
		}
		inv.ToolExecutionNotifications = append(inv.ToolExecutionNotifications, n)
	}
	return inv
}

// artifact turns a path into a URI reference (§3.4): a path under base
// (relative paths are taken from base, the working directory) as a
// relative URI with forward slashes against %SRCROOT%, anything else as an
// absolute file: URI. A relative URI never starts with "../": code scanning
// cannot place a file outside the checkout. Without a base, a relative path
// stays relative, minus a leading "./", unless it climbs out.
func artifact(path, base string) sarifArtifact {
	abs := path
	if !filepath.IsAbs(path) && base != "" {
		abs = filepath.Join(base, path)
	}
	if filepath.IsAbs(abs) && base != "" {
		if rel, err := filepath.Rel(base, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			path = rel
		} else {
			path = abs
		}
	}
	p := filepath.ToSlash(path)
	if !filepath.IsAbs(path) {
		p = strings.TrimPrefix(p, "./")
		if p == ".." || strings.HasPrefix(p, "../") {
			if a, err := filepath.Abs(path); err == nil {
				path, p = a, filepath.ToSlash(a)
			}
		}
	}
	if filepath.IsAbs(path) {
		return sarifArtifact{URI: (&url.URL{Scheme: "file", Path: p}).String()}
	}
	return sarifArtifact{URI: (&url.URL{Path: p}).String(), URIBaseID: srcRoot}
}

// fingerprint identifies a finding independently of its line number.
func fingerprint(f rules.Finding) string {
	h := sha256.New()
	for _, s := range []string{f.RuleID, filepath.ToSlash(f.Path), f.Key, f.Evidence, f.Message} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
